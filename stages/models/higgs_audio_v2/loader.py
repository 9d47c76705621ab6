"""Load a higgs-audio v2 checkpoint directory into a served model.

The directory holds config.json (either vocabulary, `config.py`), the talker's safetensors (one file or shards),
tokenizer.json, and the codec in the `higgs_audio_v2_tokenizer` layout (found as `codec_location.py` says), read by
the shared tokenizer code in `stages/codecs/`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.components.higgs_audio_v2_tokenizer.loading import load_audio_tokenizer
from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
from vocalis.stages.layers.weights import build_empty
from vocalis.stages.models.higgs_audio_v2.adapter import HiggsAudioV2Adapter
from vocalis.stages.models.higgs_audio_v2.codec_location import codec_dir
from vocalis.stages.models.higgs_audio_v2.config import HiggsAudioV2Config
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsCodecDecoder, HiggsTalkerModel
from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker
from vocalis.stages.models.higgs_audio_v2.tokenizer import TextTokenizer
from vocalis.stages.models.higgs_audio_v2.weights import load_talker
from vocalis.stages.models.quantizable import Quantizable, quantize_stages
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.deploy import DeployConfig


def load_modules(path: Path, dtype: torch.dtype = torch.float32) -> tuple[HiggsAudioV2Talker, AudioTokenizer, TextTokenizer]:
    """Talker (in `dtype`), codec (float32) and tokenizer of checkpoint `path`, on the CPU."""
    config = HiggsAudioV2Config.from_dir(path)
    codec = load_audio_tokenizer(codec_dir(path))
    if codec.config.num_quantizers != config.num_codebooks:
        raise ValueError(f"{path}: the codec has {codec.config.num_quantizers} codebooks, the talker {config.num_codebooks}")
    if codec.config.codebook_size != config.num_codes:
        raise ValueError(f"{path}: the codec has {codec.config.codebook_size} codes per codebook, the talker {config.num_codes}")
    # built in its dtype and read one tensor at a time: the load never holds a float32 talker or the files beside it
    talker = load_talker(build_empty(lambda: HiggsAudioV2Talker(config), dtype), path).eval()
    return talker, codec, TextTokenizer(path, config)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("code2wav")
    talker, codec, tokenizer = load_modules(path, talker_deploy.torch_dtype)
    talker = talker.to(talker_deploy.device, talker_deploy.torch_dtype)
    quantized = quantize_stages(deploy, Quantizable("talker", (talker,)))
    codec = codec.to(codec_deploy.device, codec_deploy.torch_dtype)
    policy = codec_deploy.chunk_policy()
    if policy.lookahead_frames < talker.config.num_codebooks - 1:
        raise ValueError(
            f"deploy: code2wav lookahead_frames must be at least {talker.config.num_codebooks - 1} "
            "(the delay pattern: a frame's last codebook arrives that many rows later)"
        )
    model = HiggsTalkerModel(talker, tokenizer, codec, talker_deploy.max_len, talker_deploy.device, talker_deploy.torch_dtype)
    adapter = HiggsAudioV2Adapter(codec.config.sample_rate)
    stages = [
        AutoregressiveStage(
            "talker", model, max_num_seqs=talker_deploy.max_num_seqs, max_num_batched_tokens=talker_deploy.max_num_batched_tokens,
            dtype=talker_deploy.torch_dtype, device=talker_deploy.device, **talker_deploy.kv_cache_options(), handover=policy,
        ),
        ChunkStage("code2wav", HiggsCodecDecoder(codec, talker.config.num_codes, codec_deploy.device, codec_deploy.torch_dtype),
                   policy, max_num_seqs=codec_deploy.max_num_seqs),
    ]
    return LoadedModel.serving(path.name, "higgs_audio_v2", adapter, stages, quantized=quantized)
