"""Build a ready-to-serve GLM-TTS model: modules, adapter, and the voices -> llm -> flow pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig

log = logging.getLogger(__name__)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.cosyvoice_common.flow_vocoder import FlowVocoderDecoder
    from vocalis.stages.models.cosyvoice_common.voice_prompt import VoicePreparer, conditioning
    from vocalis.stages.models.glm_tts.adapter import GLMTTSAdapter
    from vocalis.stages.models.glm_tts.frontend import Frontend
    from vocalis.stages.models.glm_tts.runtime import GLMTTSLM, TokenBudget
    from vocalis.stages.models.glm_tts.weights import load_modules
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage
    from vocalis.stages.runtime.prepare import PrepareStage

    lm_deploy, flow_deploy = deploy.stage("llm"), deploy.stage("flow")
    modules = load_modules(path, dtype=lm_deploy.torch_dtype, device=lm_deploy.device, flow_device=flow_deploy.device,
                           flow_dtype=flow_deploy.torch_dtype)
    default = TokenBudget()
    budget = TokenBudget(lm_deploy.min_tokens_per_text_token or default.min_ratio, lm_deploy.max_tokens_per_text_token or default.max_ratio)
    lm = GLMTTSLM(modules.lm, modules.tokenizer, lm_deploy.max_len, budget)
    quantized = quantize_stages(deploy, Quantizable("llm", (modules.lm, lm.head)), Quantizable.flow_dit("flow", modules.flow.estimator))
    decoder = FlowVocoderDecoder(modules.flow, modules.hift, conditioning)
    log.info("GLM-TTS flow: %d tokens of lookahead; chunk ends approximate a whole-utterance decode (the DiT and its GRN "
             "see the whole utterance, as in the published streaming)", flow_deploy.lookahead_frames)
    adapter = GLMTTSAdapter(modules.config.sample_rate)
    stages = [
        PrepareStage("voices", VoicePreparer(Frontend(path, modules.config, max(lm_deploy.threads, 1)))),
        autoregressive_stage(lm, lm_deploy, flow_deploy),
        chunk_stage(decoder, flow_deploy),
    ]
    return LoadedModel.serving(path.name, "glm_tts", adapter, stages, quantized=quantized)
