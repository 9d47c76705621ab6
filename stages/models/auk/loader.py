"""Load an assembled AuK checkpoint directory (vLLM-Omni's `prepare_auk_checkpoint.py` layout) into a served model.

`auk.safetensors` (a link to `auk_base.safetensors` or `auk_flash.safetensors`) holds the DiT under `transformer.`
and the fusion's `layer_weights`/`layer_scale`; `vae.safetensors` the VAE; `model-*.safetensors` the Qwen2.5-Omni-3B
snapshot, of which only the thinker's text model and audio tower are used. Loading is strict: every parameter must be
found, and every tensor in the files used or declared unused by design (below).
"""

from __future__ import annotations

from pathlib import Path

import torch

from vocalis.stages.deploy import DeployConfig
from vocalis.stages.model import LoadedModel
from vocalis.stages.models.auk.adapter import AuKAdapter
from vocalis.stages.models.auk.config import AuKConfig
from vocalis.stages.models.auk.dit import AuKDiT
from vocalis.stages.models.auk.encoder import ConditionEncoder
from vocalis.stages.models.auk.prompt import PromptBuilder
from vocalis.stages.models.auk.runtime import ConditionStage, DecodeStage, FlowStage
from vocalis.stages.models.auk.vae import AuKVAE
from vocalis.stages.pipeline import Pipeline
from vocalis.stages.weights import Weights, fold_weight_norm, load_strict, read_safetensors

DIT_FILES = ("auk.safetensors", "auk_base.safetensors", "auk_flash.safetensors")
QWEN_UNUSED = (
    r"thinker\.lm_head\..*",  # prefill only: no tokens are sampled
    r"thinker\.visual\..*",  # no images or video
    r"thinker\.audio_tower\.audio_bos_eos_token\..*",  # the tower's forward never reads it
    r"talker\..*",  # Qwen2.5-Omni's speech generator, not AuK's
    r"token2wav\..*",
)
VAE_UNUSED = (r"flow\..*",)
"""The VAE's normalising flow regularises the posterior in training only."""


def dit_file(path: Path) -> Path:
    for name in DIT_FILES:
        if (path / name).is_file():
            return path / name
    raise ValueError(f"{path} has none of {', '.join(DIT_FILES)}")


def variant_of(path: Path, config_variant: str) -> str:
    """"flash" or "base": the file auk.safetensors links to, else config.json's `variant`."""
    resolved = dit_file(path).resolve().name
    if resolved == "auk_flash.safetensors":
        return "flash"
    if resolved == "auk_base.safetensors":
        return "base"
    return config_variant


def _qwen_weights(path: Path) -> Weights:
    files = sorted(p for p in path.glob("model*.safetensors"))
    if not files:
        raise ValueError(f"{path} has no model*.safetensors (the Qwen2.5-Omni-3B snapshot)")
    weights: Weights = {}
    for file in files:
        weights |= read_safetensors(file)
    return weights


def load_modules(path: Path, dtype: torch.dtype = torch.float32) -> tuple[AuKConfig, ConditionEncoder, AuKDiT, AuKVAE, PromptBuilder]:
    import json

    data = json.loads((path / "config.json").read_text())
    config = AuKConfig.from_dict(data, variant=variant_of(path, str(data.get("variant", "base"))))
    dit_weights = read_safetensors(dit_file(path))
    encoder = ConditionEncoder(config.text, config.audio)
    qwen = {k: v for k, v in _qwen_weights(path).items()}
    fusion = {name: dit_weights[name] for name in ("layer_weights", "layer_scale") if name in dit_weights}
    load_strict(encoder, {**qwen, **fusion}, path, unused=QWEN_UNUSED)
    dit = AuKDiT(config.dit, config.vae.latent_dim)
    holder = torch.nn.Module()  # so that errors name the published keys (transformer.*)
    holder.transformer = dit
    load_strict(holder, {k: v for k, v in dit_weights.items() if k not in fusion}, dit_file(path))
    vae = AuKVAE(config.vae)
    load_strict(vae, fold_weight_norm(read_safetensors(path / "vae.safetensors")), path / "vae.safetensors", unused=VAE_UNUSED)
    for module in (encoder, dit, vae):
        module.eval().requires_grad_(False)
    return config, encoder, dit.to(dtype), vae, PromptBuilder.from_dir(path, config)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    condition_deploy, flow_deploy, decode_deploy = deploy.stage("condition"), deploy.stage("flow"), deploy.stage("decode")
    config, encoder, dit, vae, prompts = load_modules(path, flow_deploy.torch_dtype)
    encoder = encoder.to(condition_deploy.device, condition_deploy.torch_dtype)
    dit = dit.to(flow_deploy.device)
    decoder_vae = vae.to(decode_deploy.device)
    adapter = AuKAdapter(config)
    stages = [
        ConditionStage("condition", config, encoder, decoder_vae, prompts, condition_deploy.device, condition_deploy.max_num_seqs),
        FlowStage("flow", dit, flow_deploy.max_num_seqs, flow_deploy.device),
        DecodeStage("decode", decoder_vae, decode_deploy.first_chunk_frames, decode_deploy.chunk_frames,
                    decode_deploy.left_context_frames, decode_deploy.max_num_seqs, decode_deploy.device),
    ]
    name = "AuK-Flash" if config.flash else "AuK"
    return LoadedModel(name=name if path.name in ("", ".") else path.name, family="auk", capabilities=adapter.capabilities,
                       adapter=adapter, pipeline=Pipeline(stages))
