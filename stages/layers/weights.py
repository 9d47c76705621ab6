"""Checkpoint tensors into torch modules: read, fold weight norm, select by prefix, load strictly.

Loading is strict: every tensor of a file must land in a module, or match a pattern the family declares unused
(training-only parts), and every module tensor must come from the file. A renamed or forgotten key therefore fails
at start-up, naming the keys, not as silently wrong audio.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

Weights = dict[str, torch.Tensor]

WEIGHT_NORM_SPELLINGS = (
    ("weight_g", "weight_v"),  # torch.nn.utils.weight_norm
    ("parametrizations.weight.original0", "parametrizations.weight.original1"),  # torch.nn.utils.parametrizations
)
SHOWN_KEYS = 8
"""Key names an error lists at most, per kind."""


def read_safetensors(path: Path) -> Weights:
    """One .safetensors file, or every one in a directory (sharded checkpoints)."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no safetensors under {path}")
    weights: Weights = {}
    for file in files:
        weights |= load_file(str(file))
    return weights


def read_state_dict(path: Path) -> Weights:
    """A torch `.pt`/`.pth`/`.bin` state dict, unpickled with weights_only=True (tensors and plain containers only)."""
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
    return dict(state)


def read_weights(path: Path) -> Weights:
    """Tensors of a checkpoint file or directory, safetensors or a torch state dict, by the file's suffix."""
    path = Path(path)
    if path.is_file() and path.suffix in (".pt", ".pth", ".bin"):
        return read_state_dict(path)
    return read_safetensors(path)


def _norm_dim(g: torch.Tensor) -> int:
    """The dimension weight norm kept: the one axis where the magnitude g is not 1 (-1: a single scalar norm)."""
    dims = [d for d in range(g.dim()) if g.shape[d] != 1]
    return dims[0] if len(dims) == 1 else -1


def fold_weight_norm(weights: Weights) -> Weights:
    """Replace each weight-normed pair (magnitude g, direction v), in either spelling, by weight = g * v / |v|.

    The norm runs over every dimension but the one g keeps (dim 0 for convolutions, 2 for HuBERT's positional conv),
    computed as torch's weight norm does, in float32, and cast back to v's dtype."""
    out = dict(weights)
    for g_name, v_name in WEIGHT_NORM_SPELLINGS:
        for key in [k for k in weights if k.endswith("." + g_name)]:
            prefix = key[: -len(g_name)]
            g, v = out.pop(key), out.pop(prefix + v_name)
            out[prefix + "weight"] = torch._weight_norm(v.float(), g.float(), _norm_dim(g)).to(v.dtype)
    return out


def take(weights: Weights, prefix: str) -> Weights:
    """The tensors under `prefix`, with it removed from their names."""
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def _listed(keys: list[str]) -> str:
    return f"{keys[:SHOWN_KEYS]}{'...' if len(keys) > SHOWN_KEYS else ''}"


def load_strict(module: nn.Module, weights: Weights, where: object, unused: Iterable[str] = ()) -> nn.Module:
    """Copy `weights` into `module` by name (cast to each tensor's dtype); `unused` are regexes (full match) of keys
    the file may hold that the module knowingly has no use for. Raises ValueError naming missing, unexpected and
    misshapen keys."""
    state = module.state_dict()
    patterns = [re.compile(p) for p in unused]
    unexpected = sorted(k for k in weights if k not in state and not any(p.fullmatch(k) for p in patterns))
    missing = sorted(k for k in state if k not in weights)
    if missing or unexpected:
        raise ValueError(f"{where}: weights do not match the module: missing {_listed(missing)}, unexpected {_listed(unexpected)}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(weights[name].shape):
            raise ValueError(f"{where}: {name} has shape {tuple(weights[name].shape)}, the configuration says {tuple(tensor.shape)}")
    module.load_state_dict({k: weights[k] for k in state}, strict=True)
    return module
