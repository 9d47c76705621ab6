"""Build a ready-to-serve Voxtral TTS model: modules, adapter, and the frame_generator -> audio_tokenizer pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.models.voxtral.adapter import VoxtralAdapter
    from vocalis.stages.models.voxtral.runtime import FrameGenerator
    from vocalis.stages.models.voxtral.weights import load_modules
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage

    generator_deploy, codec_deploy = deploy.stage("frame_generator"), deploy.stage("audio_tokenizer")
    modules = load_modules(path, dtype=generator_deploy.torch_dtype, device=generator_deploy.device, codec_device=codec_deploy.device)
    quantized = quantize_stages(deploy, Quantizable("frame_generator", (modules.lm,)))
    generator = FrameGenerator(modules.lm, modules.tekken, modules.voices, generator_deploy.max_len, modules.encoder, modules.codec.quantizer)
    adapter = VoxtralAdapter(tuple(modules.voices), modules.config.codec.sampling_rate, modules.encoder_weights)
    stages = [
        autoregressive_stage(generator, generator_deploy, codec_deploy),
        chunk_stage(StatefulCodecDecoder(modules.codec, modules.codec.args.samples_per_frame), codec_deploy),
    ]
    return LoadedModel.serving(path.name, "voxtral", adapter, stages, quantized=quantized)
