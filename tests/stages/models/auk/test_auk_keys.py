"""The real key set: the tensors the loader builds at the published sizes equal the published files' names and
shapes (real_keys.json, made by make_goldens.py from the module trees that load the real files: transformers' thinker
for the Qwen2.5-Omni-3B snapshot, sglang-omni's port for auk.safetensors and vae.safetensors), apart from the tensors
declared unused by design; and loading is strict."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from vocalis.stages.models.auk.config import AuKConfig
from vocalis.stages.models.auk.dit import AuKDiT
from vocalis.stages.models.auk.encoder import ConditionEncoder
from vocalis.stages.models.auk.loader import QWEN_UNUSED, VAE_UNUSED, load_modules
from vocalis.stages.models.auk.vae import AuKVAE

REAL = json.loads(Path("tests/goldens/auk/real_keys.json").read_text())
TINY = Path("tests/goldens/auk/tiny")
REAL_SIZES = json.loads(Path("bench/configs/auk_real_sizes.json").read_text())
"""The published sizes of the Qwen2.5-Omni-3B thinker (and of the DiT and VAE), laid over the tiny bundle's config."""


def overlay(base: dict, top: dict) -> dict:
    return base | {k: overlay(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v for k, v in top.items()}


REAL_CONFIG = AuKConfig.from_dict(overlay(json.loads((TINY / "config.json").read_text()), REAL_SIZES))


def shapes(module: torch.nn.Module, prefix: str = "") -> dict[str, list[int]]:
    return {prefix + k: list(v.shape) for k, v in module.state_dict().items()}


def published(keys: dict[str, list[int]], unused: tuple[str, ...]) -> dict[str, list[int]]:
    """The published tensors the loader must use: unused ones dropped, weight-normed pairs folded as the loader does."""
    kept = {k: v for k, v in keys.items() if not any(re.fullmatch(p, k) for p in unused)}
    out = {}
    for key, shape in kept.items():
        if key.endswith(".weight_g"):
            continue
        out[key.removesuffix("_v") if key.endswith(".weight_v") else key] = shape
    return out


def test_thinker_and_fusion_at_the_published_size():
    with torch.device("meta"):
        encoder = ConditionEncoder(REAL_CONFIG.text, REAL_CONFIG.audio)
    ours = shapes(encoder)
    fusion = {k: ours.pop(k) for k in ("layer_weights", "layer_scale")}
    assert ours == published(REAL["qwen"], QWEN_UNUSED)
    assert fusion == {k: REAL["auk"][k] for k in fusion}


def test_dit_and_vae_at_the_published_size():
    with torch.device("meta"):
        dit = AuKDiT(REAL_CONFIG.dit, REAL_CONFIG.vae.latent_dim)
        vae = AuKVAE(REAL_CONFIG.vae)
    expected_dit = {k: v for k, v in REAL["auk"].items() if k.startswith("transformer.")}
    assert shapes(dit, "transformer.") == expected_dit
    assert shapes(vae) == published(REAL["vae"], VAE_UNUSED)


@pytest.mark.parametrize(("file", "drop", "add"), [
    ("auk_base.safetensors", "transformer.proj_out.bias", None),
    ("vae.safetensors", None, "decoder_extra.weight"),
    ("model.safetensors", "thinker.model.norm.weight", None),
])
def test_loading_is_strict_and_names_the_key(tmp_path, file, drop, add):
    copy = tmp_path / "tiny"
    shutil.copytree(TINY, copy, symlinks=True)
    weights = load_file(str(copy / file))
    if drop:
        del weights[drop]
    if add:
        weights[add] = torch.zeros(1)
    save_file(weights, str(copy / file))
    with pytest.raises(ValueError, match=re.escape(drop or add)):
        load_modules(copy)
