"""Build a ready-to-serve Qwen3-TTS model: modules, adapter, and the voices -> talker -> code2wav pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.models.qwen3_tts.adapter import Qwen3TTSAdapter
    from vocalis.stages.models.qwen3_tts.runtime import TalkerStageModel, code2wav
    from vocalis.stages.models.qwen3_tts.voices import VoiceCloner
    from vocalis.stages.models.qwen3_tts.weights import load_modules
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage
    from vocalis.stages.runtime.prepare import PrepareStage

    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("code2wav")
    modules = load_modules(path, dtype=talker_deploy.torch_dtype, device=talker_deploy.device, codec_dtype=codec_deploy.torch_dtype,
                           codec_device=codec_deploy.device)
    # The talker and its code predictor; clone encoders stay float.
    quantized = quantize_stages(deploy, Quantizable("talker", (modules.talker,)))
    cloner = VoiceCloner(modules)
    talker = TalkerStageModel(modules, talker_deploy.max_len, cloner, **talker_deploy.graph_options())
    adapter = Qwen3TTSAdapter(modules)
    stages = [
        PrepareStage("voices", cloner),  # clone clips are encoded here, while the talker keeps stepping
        autoregressive_stage(talker, talker_deploy, codec_deploy),
        # Chunks are decoded from each request's carried decoder state: no left context is re-decoded.
        chunk_stage(code2wav(modules.decoder, cloner), codec_deploy),
    ]
    return LoadedModel.serving(path.name, "qwen3_tts", adapter, stages, quantized=quantized)
