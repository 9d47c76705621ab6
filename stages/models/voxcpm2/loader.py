"""Build a ready-to-serve VoxCPM2 model: modules, adapter, and the latent_generator -> audio_vae pipeline.

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
    from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Adapter
    from vocalis.stages.models.voxcpm2.decoding import PatchDecoder
    from vocalis.stages.models.voxcpm2.generator import LatentGenerator
    from vocalis.stages.models.voxcpm2.voices import VoiceEncoder
    from vocalis.stages.models.voxcpm2.weights import load_modules
    from vocalis.stages.pipeline import Pipeline

    deploy = deploy or load_deploy(DEPLOY_DEFAULTS)
    generator_deploy, vae_deploy = deploy.stage("latent_generator"), deploy.stage("audio_vae")
    modules = load_modules(path, dtype=generator_deploy.torch_dtype, device=generator_deploy.device, vae_device=vae_deploy.device)
    voices = VoiceEncoder(modules.vae, modules.config)
    decoder = PatchDecoder(modules.vae, modules.config, voices, generator_deploy.torch_dtype, generator_deploy.device)
    if vae_deploy.left_context_frames < decoder.context_patches:
        log.info("audio_vae left context (%d patches) is shorter than the decoder's receptive field (%d): streamed chunks "
                 "approximate a whole-utterance decode at their starts", vae_deploy.left_context_frames, decoder.context_patches)
    generator = LatentGenerator(modules.model, modules.tokenizer, voices, generator_deploy.max_len)
    adapter = VoxCPM2Adapter(modules.config, max_new_tokens=generator.cache_shape.max_len - 1)
    stages = [
        AutoregressiveStage(
            "latent_generator",
            generator,
            max_num_seqs=generator_deploy.max_num_seqs,
            max_num_batched_tokens=generator_deploy.max_num_batched_tokens,
            dtype=generator_deploy.torch_dtype,
            device=generator_deploy.device,
        ),
        ChunkStage("audio_vae", decoder, vae_deploy.chunk_policy(), max_num_seqs=vae_deploy.max_num_seqs),
    ]
    return LoadedModel(name=path.name, family="voxcpm2", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))

