"""Build a ready-to-serve Qwen3-TTS model: modules, adapter, and the talker -> code2wav pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.deploy import DeployConfig
from vocalis.stages.family import ModelFamily
from vocalis.stages.model import LoadedModel
from vocalis.stages.models.qwen3_tts.config import MODEL_TYPE

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.deployed_stages import autoregressive_stage, chunk_stage
    from vocalis.stages.models.qwen3_tts.adapter import Qwen3TTSAdapter
    from vocalis.stages.models.qwen3_tts.stages import CodecDecoderModel, TalkerStageModel
    from vocalis.stages.models.qwen3_tts.weights import load_modules
    from vocalis.stages.pipeline import Pipeline

    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("code2wav")
    modules = load_modules(path, dtype=talker_deploy.torch_dtype, device=talker_deploy.device, codec_dtype=codec_deploy.torch_dtype,
                           codec_device=codec_deploy.device)
    adapter = Qwen3TTSAdapter(modules)
    stages = [
        autoregressive_stage(TalkerStageModel(modules, talker_deploy.max_len), talker_deploy),
        # The decoder's transformer attends over its sliding window: that much left context decodes chunks exactly.
        chunk_stage(CodecDecoderModel(modules.decoder), codec_deploy, modules.config.speech_tokenizer.decoder.sliding_window),
    ]
    return LoadedModel(name=path.name, family="qwen3_tts", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))


FAMILY = ModelFamily(name="qwen3_tts", model_types=(MODEL_TYPE,), deploy_defaults=DEPLOY_DEFAULTS, load=load)
