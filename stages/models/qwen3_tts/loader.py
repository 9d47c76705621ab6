"""Build a ready-to-serve Qwen3-TTS model: modules, adapter, and the talker -> code2wav pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vocalis.stages.deploy import DeployConfig, load_deploy
from vocalis.stages.family import ModelFamily
from vocalis.stages.model import LoadedModel
from vocalis.stages.models.qwen3_tts.config import MODEL_TYPE

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")
log = logging.getLogger(__name__)


def load(path: Path, deploy: DeployConfig | None = None) -> LoadedModel:
    from vocalis.stages.autoregressive import AutoregressiveStage
    from vocalis.stages.chunk_stage import ChunkStage
    from vocalis.stages.models.qwen3_tts.adapter import Qwen3TTSAdapter
    from vocalis.stages.models.qwen3_tts.stages import CodecDecoderModel, TalkerStageModel
    from vocalis.stages.models.qwen3_tts.weights import load_modules
    from vocalis.stages.pipeline import Pipeline

    deploy = deploy or load_deploy(DEPLOY_DEFAULTS)
    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("code2wav")
    modules = load_modules(path, dtype=talker_deploy.torch_dtype, device=talker_deploy.device, codec_dtype=codec_deploy.torch_dtype)
    if codec_deploy.device != talker_deploy.device:
        modules.decoder.to(codec_deploy.device)
    decoder_config = modules.config.speech_tokenizer.decoder
    if codec_deploy.left_context_frames < decoder_config.sliding_window:
        log.info("code2wav left context (%d frames) is shorter than the decoder's attention window (%d): streamed chunks "
                 "approximate a whole-utterance decode at their starts", codec_deploy.left_context_frames, decoder_config.sliding_window)
    adapter = Qwen3TTSAdapter(modules)
    stages = [
        AutoregressiveStage(
            "talker",
            TalkerStageModel(modules, talker_deploy.max_len),
            max_num_seqs=talker_deploy.max_num_seqs,
            max_num_batched_tokens=talker_deploy.max_num_batched_tokens,
            dtype=talker_deploy.torch_dtype,
            **talker_deploy.kv_cache_options(),
            handover=codec_deploy.chunk_policy(),
            device=talker_deploy.device,
        ),
        ChunkStage("code2wav", CodecDecoderModel(modules.decoder), codec_deploy.chunk_policy(), max_num_seqs=codec_deploy.max_num_seqs),
    ]
    return LoadedModel(name=path.name, family="qwen3_tts", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))


FAMILY = ModelFamily(name="qwen3_tts", model_types=(MODEL_TYPE,), deploy_defaults=DEPLOY_DEFAULTS, load=load)
