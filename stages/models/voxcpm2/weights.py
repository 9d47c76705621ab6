"""A VoxCPM2 checkpoint directory, unchanged from its publisher, into ready torch modules.

The layout: config.json, model.safetensors (`base_lm.*`, `residual_lm.*`, `feat_encoder.*`,
`feat_decoder.estimator.*`, `fsq_layer.*`, the projections, `stop_*`), audiovae.safetensors
(`encoder.*`, `decoder.*`, weight-normalised convolutions), tokenizer.json + tokenizer_config.json.
Loading is strict: every tensor of a file must land in a module and every module tensor must come
from the file. Weight norm is accepted in both spellings (`weight_g`/`weight_v`, and
`parametrizations.weight.original0/1`) and folded into a plain `weight`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.modules import VoxCPM2
from vocalis.stages.models.voxcpm2.tokenizer import TextTokenizer
from vocalis.stages.models.voxcpm2.vae import AudioVAE

_WEIGHT_NORM = (("weight_g", "weight_v"), ("parametrizations.weight.original0", "parametrizations.weight.original1"))


@dataclass
class VoxCPM2Modules:
    path: Path
    config: VoxCPM2Config
    tokenizer: TextTokenizer
    model: VoxCPM2
    vae: AudioVAE
    """Always float32, as the reference runs it."""


def fold_weight_norm(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each (g, v) pair by weight = g * v / |v|, the norm over all but the first dim (torch's dim=0)."""
    out = dict(weights)
    for g_name, v_name in _WEIGHT_NORM:
        for key in [k for k in weights if k.endswith("." + g_name)]:
            prefix = key[: -len(g_name)]
            g, v = out.pop(key), out.pop(prefix + v_name)
            norm = v.float().flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))
            out[prefix + "weight"] = (g.float() * v.float() / norm).to(v.dtype)
    return out


def load_strict(module: nn.Module, weights: dict[str, torch.Tensor], source: Path) -> None:
    expected = module.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{source}: tensors missing {missing[:8]}{'...' if len(missing) > 8 else ''}, "
                         f"unexpected {unexpected[:8]}{'...' if len(unexpected) > 8 else ''}")
    for name, tensor in weights.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise ValueError(f"{source}: {name} has shape {tuple(tensor.shape)}, the config implies {tuple(expected[name].shape)}")
    module.load_state_dict(weights, strict=True)


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", vae_device: str | None = None) -> VoxCPM2Modules:
    path = Path(path)
    config = VoxCPM2Config.from_dir(path)
    tokenizer = TextTokenizer(path)
    if len(tokenizer) > config.lm.vocab_size:
        raise ValueError(f"{path}: the tokenizer has {len(tokenizer)} tokens, the LM embeds {config.lm.vocab_size}")
    model = VoxCPM2(config)
    load_strict(model, load_file(str(path / "model.safetensors")), path / "model.safetensors")
    vae = AudioVAE(config.audio_vae)
    load_strict(vae, fold_weight_norm(load_file(str(path / "audiovae.safetensors"))), path / "audiovae.safetensors")
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    vae = vae.to(device=vae_device or device, dtype=torch.float32).eval().requires_grad_(False)
    return VoxCPM2Modules(path, config, tokenizer, model, vae)
