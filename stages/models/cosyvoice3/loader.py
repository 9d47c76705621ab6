"""Build a ready-to-serve CosyVoice3 model: modules, adapter, and the voices -> llm -> flow pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig

log = logging.getLogger(__name__)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.cosyvoice3.adapter import CosyVoice3Adapter
    from vocalis.stages.models.cosyvoice3.frontend import Frontend
    from vocalis.stages.models.cosyvoice3.runtime import SpeechLM
    from vocalis.stages.models.cosyvoice3.weights import load_modules
    from vocalis.stages.models.cosyvoice_common.flow_vocoder import FlowVocoderDecoder
    from vocalis.stages.models.cosyvoice_common.voice_prompt import VoicePreparer, conditioning
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage
    from vocalis.stages.runtime.prepare import PrepareStage

    lm_deploy, flow_deploy = deploy.stage("llm"), deploy.stage("flow")
    modules = load_modules(path, dtype=lm_deploy.torch_dtype, device=lm_deploy.device, flow_device=flow_deploy.device,
                           flow_dtype=flow_deploy.torch_dtype)
    # The head stays float: the LM reads its device from the head's weight.
    quantized = quantize_stages(deploy, Quantizable("llm", (modules.lm,), keep=(modules.lm.llm_decoder,)),
                                Quantizable.flow_dit("flow", modules.flow.estimator))
    decoder = FlowVocoderDecoder(modules.flow, modules.hift, conditioning, modules.config.n_timesteps,
                                 first_chunk=lambda request: request.stage_input.initial_codec_chunk_frames,
                                 prompt_cache_bytes=flow_deploy.prompt_cache_bytes)
    if flow_deploy.lookahead_frames < decoder.exact_lookahead_tokens:
        log.info("flow lookahead (%d tokens) is shorter than the %d the decoder needs: streamed chunk ends approximate a "
                 "whole-utterance decode", flow_deploy.lookahead_frames, decoder.exact_lookahead_tokens)
    lm = SpeechLM(modules, lm_deploy.max_len)
    adapter = CosyVoice3Adapter(modules.config)
    stages = [
        PrepareStage("voices", VoicePreparer(Frontend(path, modules.config))),
        autoregressive_stage(lm, lm_deploy, flow_deploy),
        chunk_stage(decoder, flow_deploy),
    ]
    return LoadedModel.serving(path.name, "cosyvoice3", adapter, stages, quantized=quantized)
