"""Load an assembled AuK checkpoint directory (vLLM-Omni's `prepare_auk_checkpoint.py` layout), or the upstream AuK
directory with the Qwen2.5-Omni-3B snapshot named by the condition stage's `weights_dir`, into a served model.

`auk.safetensors` (a link to `auk_base.safetensors` or `auk_flash.safetensors`) holds the DiT under `transformer.`
and the fusion's `layer_weights`/`layer_scale`; `vae.safetensors` the VAE; `model-*.safetensors` the Qwen2.5-Omni-3B
snapshot, of which only the thinker's text model and audio tower are used. Loading is strict: every parameter must be
found, and every tensor in the files used or declared unused by design (below).
"""

from __future__ import annotations

from pathlib import Path

import torch

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.layers.weights import SafetensorsReader, build_empty, fold_weight_norm, load_strict
from vocalis.stages.models.auk.adapter import AuKAdapter
from vocalis.stages.models.auk.config import AuKConfig, upstream_dict
from vocalis.stages.models.auk.dit import AuKDiT
from vocalis.stages.models.auk.encoder import ConditionEncoder
from vocalis.stages.models.auk.prompt import PromptBuilder
from vocalis.stages.models.auk.runtime import Conditioner, Flow, LatentDecoder
from vocalis.stages.models.auk.vae import AuKVAE
from vocalis.stages.models.quantizable import Quantizable, quantize_stages
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.deploy import DeployConfig
from vocalis.stages.runtime.iterative import IterativeStage

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


def _qwen_files(path: Path) -> list[Path]:
    files = sorted(p for p in path.glob("model*.safetensors"))
    if not files:
        raise ValueError(f"{path} has no model*.safetensors (the Qwen2.5-Omni-3B snapshot)")
    return files


def upstream_variant(path: Path) -> str:
    """The upstream directory's variant: the weights file it holds, else "flash" in its name."""
    if (path / "auk_flash.safetensors").is_file() and not (path / "auk_base.safetensors").is_file():
        return "flash"
    if (path / "auk_base.safetensors").is_file():
        return "base"
    return "flash" if "flash" in path.resolve().name.lower() else "base"


def load_modules(path: Path, dtype: torch.dtype = torch.float32, qwen_dir: Path | None = None,
                 encoder_dtype: torch.dtype = torch.float32) -> tuple[AuKConfig, ConditionEncoder, AuKDiT, AuKVAE, PromptBuilder]:
    """The modules of an assembled bundle at `path`, or of the upstream AuK directory at `path` with the
    Qwen2.5-Omni-3B snapshot at `qwen_dir` (nothing is assembled on disk): the DiT in `dtype`, the condition encoder
    in `encoder_dtype`, the VAE in float32. The DiT and the encoder are built in their dtypes and read one tensor at a
    time, so a load never holds a float32 copy of them or a file's tensors beside them."""
    import dataclasses
    import json

    if qwen_dir is None:
        qwen_dir = path
        config = AuKConfig.from_dir(path)
        config = dataclasses.replace(config, variant=variant_of(path, config.variant))
    else:
        config = AuKConfig.from_dict(upstream_dict(path, json.loads((qwen_dir / "config.json").read_text()), upstream_variant(path)))
    # the snapshot's files, and the DiT's file last: the fusion's layer_weights/layer_scale live beside the DiT
    weights = SafetensorsReader([*_qwen_files(qwen_dir), dit_file(path)])
    encoder = build_empty(lambda: ConditionEncoder(config.text, config.audio), encoder_dtype)
    load_strict(encoder, weights.where(lambda k: not k.startswith("transformer.")), path, unused=QWEN_UNUSED)
    dit = build_empty(lambda: AuKDiT(config.dit, config.vae.latent_dim), dtype)
    holder = torch.nn.Module()  # so that errors name the published keys (transformer.*)
    holder.transformer = dit
    load_strict(holder, weights.where(lambda k: k.startswith("transformer.")), dit_file(path))
    vae = AuKVAE(config.vae)
    load_strict(vae, fold_weight_norm(dict(SafetensorsReader(path / "vae.safetensors"))), path / "vae.safetensors", unused=VAE_UNUSED)
    for module in (encoder, dit, vae):
        module.eval().requires_grad_(False)
    return config, encoder.to(encoder_dtype), dit.to(dtype), vae, PromptBuilder.from_dir(qwen_dir, config)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    condition_deploy, flow_deploy, decode_deploy = deploy.stage("condition"), deploy.stage("flow"), deploy.stage("decode")
    qwen_dir = None
    if not (path / "config.json").is_file():
        if not condition_deploy.weights_dir:
            raise ValueError(
                f"{path} is the upstream AuK directory: serving it needs the Qwen2.5-Omni-3B snapshot too; give it with "
                "--stage-overrides '{\"condition\": {\"weights_dir\": \"/path/to/Qwen2.5-Omni-3B\"}}' (or serve the "
                "directory prepare_auk_checkpoint.py assembles)"
            )
        qwen_dir = Path(condition_deploy.weights_dir)
    config, encoder, dit, vae, prompts = load_modules(path, flow_deploy.torch_dtype, qwen_dir, condition_deploy.torch_dtype)
    encoder = encoder.to(condition_deploy.device, condition_deploy.torch_dtype)
    dit = dit.to(flow_deploy.device)
    decoder_vae = vae.to(decode_deploy.device)
    quantized = quantize_stages(
        deploy,
        Quantizable("condition", (encoder,)),
        Quantizable.flow_dit("flow", dit),
    )
    adapter = AuKAdapter(config)
    latents = LatentDecoder(decoder_vae, decode_deploy.device)
    stages = [
        IterativeStage("condition", Conditioner(config, encoder, decoder_vae, prompts, condition_deploy.device),
                       condition_deploy.max_num_seqs),
        IterativeStage("flow", Flow(dit, flow_deploy.device), flow_deploy.max_num_seqs),
        ChunkStage("decode", latents, latents.policy(decode_deploy.chunk_policy()), decode_deploy.max_num_seqs,
                   decode_deploy.device),
    ]
    name = "AuK-Flash" if config.flash else "AuK"
    return LoadedModel.serving(name if path.name in ("", ".") else path.name, "auk", adapter, stages, quantized=quantized)
