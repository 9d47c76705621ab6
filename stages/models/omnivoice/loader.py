"""Load an OmniVoice checkpoint directory, in the layout its publishers use, into a served model.

`model.safetensors` holds the language model (`llm.*`, `audio_embeddings`, `audio_heads`, the
`codebook_layer_offsets` buffer) and `audio_tokenizer/model.safetensors` the codec. Every
tensor in the files must be used, or be one this model knowingly has no use for (training-only
parts of the codec); every parameter must be found. Weight-normed tensors, in either of the
forms PyTorch writes (`weight_g`/`weight_v` or `parametrizations.weight.original0/1`), are folded.
"""

from __future__ import annotations

from pathlib import Path

import torch

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.components.higgs_audio_v2_tokenizer.loading import load_audio_tokenizer
from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
from vocalis.stages.layers.weights import SafetensorsReader, build_empty, fold_weight_norm_lazily, load_strict
from vocalis.stages.models.omnivoice.adapter import OmniVoiceAdapter
from vocalis.stages.models.omnivoice.backbone import OmniVoiceLM
from vocalis.stages.models.omnivoice.config import AudioTokenizerConfig, OmniVoiceConfig
from vocalis.stages.models.omnivoice.runtime import OmniVoiceGenerator, UnitDecoder
from vocalis.stages.models.omnivoice.text import TextTokenizer
from vocalis.stages.models.quantizable import Quantizable, quantize_stages
from vocalis.stages.runtime.deploy import DeployConfig
from vocalis.stages.runtime.iterative import IterativeStage


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> tuple[OmniVoiceLM, AudioTokenizer, TextTokenizer]:
    config = OmniVoiceConfig.from_dir(path)
    codec_config = AudioTokenizerConfig.from_dir(path / "audio_tokenizer")
    if codec_config.num_quantizers != config.num_audio_codebook:
        raise ValueError(
            f"{path}: the audio tokenizer has {codec_config.num_quantizers} codebooks, the model {config.num_audio_codebook}"
        )
    lm = build_empty(lambda: OmniVoiceLM(config), dtype)  # parameters in their dtype from the start
    # read one tensor at a time as it loads: a float32 LM loaded from a bfloat16 file never holds the file beside it
    weights = SafetensorsReader(path / "model.safetensors")
    offsets = weights.get("codebook_layer_offsets")
    if offsets is not None and not torch.equal(offsets.long(), lm.codebook_layer_offsets):
        raise ValueError(f"{path}: codebook_layer_offsets differ from audio_vocab_size x codebook")
    load_strict(lm, fold_weight_norm_lazily(weights), path / "model.safetensors")
    codec = load_audio_tokenizer(path / "audio_tokenizer", codec_config)
    return lm.to(device, dtype).eval(), codec.to(device).eval(), TextTokenizer(path)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    generator_deploy, decoder_deploy = deploy.stage("generator"), deploy.stage("decoder")
    lm, codec, tokenizer = load_modules(path, generator_deploy.torch_dtype, generator_deploy.device)
    quantized = quantize_stages(deploy, Quantizable("generator", (lm,)))
    codec = codec.to(decoder_deploy.device, decoder_deploy.torch_dtype)
    adapter = OmniVoiceAdapter(codec.config.sample_rate)
    generator = OmniVoiceGenerator(lm, codec, tokenizer, generator_deploy.device, generator_deploy.torch_dtype)
    stages = [
        IterativeStage("generator", generator, max_num_seqs=generator_deploy.max_num_seqs),
        IterativeStage("decoder", UnitDecoder(codec, decoder_deploy.device, decoder_deploy.torch_dtype),
                       max_num_seqs=decoder_deploy.max_num_seqs),
    ]
    return LoadedModel.serving(path.name, "omnivoice", adapter, stages, quantized=quantized)
