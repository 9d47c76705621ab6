"""Build a ready-to-serve VoxCPM2 model: modules, adapter, and the latent_generator -> audio_vae pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Adapter
    from vocalis.stages.models.voxcpm2.codec_stage import PatchDecoder
    from vocalis.stages.models.voxcpm2.runtime import LatentGenerator
    from vocalis.stages.models.voxcpm2.voices import VoiceEncoder
    from vocalis.stages.models.voxcpm2.weights import load_modules
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage

    generator_deploy, vae_deploy = deploy.stage("latent_generator"), deploy.stage("audio_vae")
    modules = load_modules(path, dtype=generator_deploy.torch_dtype, device=generator_deploy.device, vae_device=vae_deploy.device)
    quantized = quantize_stages(deploy, Quantizable("latent_generator", (modules.model,)))
    voices = VoiceEncoder(modules.vae, modules.config)
    decoder = PatchDecoder(modules.vae, modules.config, voices, generator_deploy.torch_dtype, generator_deploy.device)
    generator = LatentGenerator(modules.model, modules.tokenizer, voices, generator_deploy.max_len)
    adapter = VoxCPM2Adapter(modules.config)
    stages = [
        autoregressive_stage(generator, generator_deploy, vae_deploy),
        chunk_stage(decoder, vae_deploy, decoder.context_patches),
    ]
    return LoadedModel.serving(path.name, "voxcpm2", adapter, stages, quantized=quantized)
