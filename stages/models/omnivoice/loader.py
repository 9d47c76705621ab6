"""Load an OmniVoice checkpoint directory, in the layout its publishers use, into a served model.

`model.safetensors` holds the language model (`llm.*`, `audio_embeddings`, `audio_heads`, the
`codebook_layer_offsets` buffer) and `audio_tokenizer/model.safetensors` the codec. Every
tensor in the files must be used, or be one this model knowingly has no use for (training-only
parts of the codec); every parameter must be found. Weight-normed tensors, in either of the
forms PyTorch writes (`weight_g`/`weight_v` or `parametrizations.weight.original0/1`), are folded.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from vocalis.stages.deploy import DeployConfig
from vocalis.stages.iterative import IterativeStage
from vocalis.stages.model import LoadedModel
from vocalis.stages.models.omnivoice.adapter import OmniVoiceAdapter
from vocalis.stages.models.omnivoice.backbone import OmniVoiceLM
from vocalis.stages.models.omnivoice.codec import AudioTokenizer
from vocalis.stages.models.omnivoice.config import AudioTokenizerConfig, OmniVoiceConfig
from vocalis.stages.models.omnivoice.stage import OmniVoiceGenerator, UnitDecoderStage
from vocalis.stages.models.omnivoice.text import TextTokenizer
from vocalis.stages.pipeline import Pipeline

CODEC_UNUSED = (
    r"decoder_semantic\..*",  # reconstructs semantic features: training only
    r"fc1\..*",  # likewise
    r"quantizer\.quantizers\.\d+\.codebook\.(embed_avg|cluster_size|inited)",  # codebook EMA statistics
    r"semantic_model\.masked_spec_embed",  # SpecAugment, training only
)


def fold_weight_norm(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each weight-normed pair (magnitude g, direction v) by its weight."""
    out = dict(tensors)
    for key in list(tensors):
        for g_suffix, v_suffix in ((".weight_g", ".weight_v"), (".parametrizations.weight.original0", ".parametrizations.weight.original1")):
            if key.endswith(g_suffix):
                base = key[: -len(g_suffix)]
                g, v = out.pop(key), out.pop(base + v_suffix)
                dims = [d for d in range(g.dim()) if g.shape[d] != 1]
                dim = dims[0] if len(dims) == 1 else -1
                out[base + ".weight"] = torch._weight_norm(v.float(), g.float(), dim).to(v.dtype)
    return out


def load_weights(module: nn.Module, tensors: dict[str, torch.Tensor], unused: tuple[str, ...], where: Path) -> None:
    """Load `tensors` into `module` by name; refuses missing tensors and tensors it would silently drop."""
    tensors = fold_weight_norm(tensors)
    state = module.state_dict()
    skipped = [k for k in tensors if k not in state and any(re.fullmatch(p, k) for p in unused)]
    unexpected = sorted(k for k in tensors if k not in state and k not in skipped)
    missing = sorted(k for k in state if k not in tensors and not k.endswith("inv_freq"))
    if unexpected or missing:
        raise ValueError(f"{where}: tensors do not match the model: unexpected {unexpected[:8]}, missing {missing[:8]}")
    for key, value in tensors.items():
        if key in state and state[key].shape != value.shape:
            raise ValueError(f"{where}: {key} has shape {tuple(value.shape)}, the config says {tuple(state[key].shape)}")
    module.load_state_dict({k: v for k, v in tensors.items() if k in state}, strict=False)


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> tuple[OmniVoiceLM, AudioTokenizer, TextTokenizer]:
    config = OmniVoiceConfig.from_dir(path)
    codec_config = AudioTokenizerConfig.from_dir(path / "audio_tokenizer")
    if codec_config.num_quantizers != config.num_audio_codebook:
        raise ValueError(
            f"{path}: the audio tokenizer has {codec_config.num_quantizers} codebooks, the model {config.num_audio_codebook}"
        )
    lm = OmniVoiceLM(config)
    weights = load_file(str(path / "model.safetensors"))
    offsets = weights.get("codebook_layer_offsets")
    if offsets is not None and not torch.equal(offsets.long(), lm.codebook_layer_offsets):
        raise ValueError(f"{path}: codebook_layer_offsets differ from audio_vocab_size x codebook")
    load_weights(lm, weights, (), path / "model.safetensors")
    codec = AudioTokenizer(codec_config)
    load_weights(codec, load_file(str(path / "audio_tokenizer" / "model.safetensors")), CODEC_UNUSED, path / "audio_tokenizer")
    return lm.to(device, dtype).eval(), codec.to(device).eval(), TextTokenizer(path)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    generator_deploy, decoder_deploy = deploy.stage("generator"), deploy.stage("decoder")
    lm, codec, tokenizer = load_modules(path, generator_deploy.torch_dtype, generator_deploy.device)
    codec = codec.to(decoder_deploy.device, decoder_deploy.torch_dtype)
    adapter = OmniVoiceAdapter(codec.config.sample_rate)
    generator = OmniVoiceGenerator(lm, codec, tokenizer, generator_deploy.device, generator_deploy.torch_dtype)
    stages = [
        IterativeStage("generator", generator, max_num_seqs=generator_deploy.max_num_seqs),
        UnitDecoderStage("decoder", codec, decoder_deploy.device, decoder_deploy.torch_dtype, max_num_seqs=decoder_deploy.max_num_seqs),
    ]
    return LoadedModel(name=path.name, family="omnivoice", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))

