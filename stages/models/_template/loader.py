"""Build a ready-to-serve template-family model: modules, adapter, and the talker -> code2wav pipeline."""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.models._template.adapter import TinyAdapter
from vocalis.stages.models._template.runtime import TinyCodecModel, TinyTalkerModel
from vocalis.stages.models._template.weights import load_modules
from vocalis.stages.models.quantizable import Quantizable, quantize_stages
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.deploy import DeployConfig


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("code2wav")
    config, talker, codec = load_modules(path, talker_deploy.torch_dtype, codec_deploy.torch_dtype)
    quantized = quantize_stages(deploy, Quantizable("talker", (talker,)))  # its `quantize` deploy setting (none by default)
    adapter = TinyAdapter(config)
    stages = [
        AutoregressiveStage(
            "talker",
            TinyTalkerModel(talker, talker_deploy.max_len),
            max_num_seqs=talker_deploy.max_num_seqs,
            max_num_batched_tokens=talker_deploy.max_num_batched_tokens,
            dtype=talker_deploy.torch_dtype,
            **talker_deploy.kv_cache_options(),
            handover=codec_deploy.chunk_policy(),
        ),
        ChunkStage("code2wav", TinyCodecModel(codec), codec_deploy.chunk_policy(), max_num_seqs=codec_deploy.max_num_seqs),
    ]
    return LoadedModel.serving(path.name, "tiny_tts", adapter, stages, quantized=quantized)
