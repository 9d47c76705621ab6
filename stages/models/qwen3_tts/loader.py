"""Build a ready-to-serve Qwen3-TTS model: modules, adapter, and the voices -> talker -> code2wav pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vocalis.stages.deploy import DeployConfig, load_deploy
from vocalis.stages.model import LoadedModel

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")
log = logging.getLogger(__name__)


def load(path: Path, deploy: DeployConfig | None = None) -> LoadedModel:
    from vocalis.stages.autoregressive import AutoregressiveStage
    from vocalis.stages.chunk_stage import ChunkStage
    from vocalis.stages.models.qwen3_tts.adapter import Qwen3TTSAdapter
    from vocalis.stages.models.qwen3_tts.stages import CodecDecoderModel, TalkerStageModel
    from vocalis.stages.models.qwen3_tts.voices import VoiceCloner
    from vocalis.stages.models.qwen3_tts.weights import load_modules
    from vocalis.stages.pipeline import Pipeline
    from vocalis.stages.prepare import PrepareStage

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
    cloner = VoiceCloner(modules)
    stages = [
        PrepareStage("voices", cloner),  # clone clips are encoded here, while the talker keeps stepping
        AutoregressiveStage(
            "talker",
            TalkerStageModel(modules, talker_deploy.max_len, cloner),
            max_num_seqs=talker_deploy.max_num_seqs,
            max_num_batched_tokens=talker_deploy.max_num_batched_tokens,
            dtype=talker_deploy.torch_dtype,
            device=talker_deploy.device,
        ),
        ChunkStage("code2wav", CodecDecoderModel(modules.decoder, cloner), codec_deploy.chunk_policy(), max_num_seqs=codec_deploy.max_num_seqs),
    ]
    return LoadedModel(name=path.name, family="qwen3_tts", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))

