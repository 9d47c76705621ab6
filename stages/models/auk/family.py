"""The AuK family as the registry sees it: assembled checkpoints with config.json model_type "auk", and the upstream
AuK directory as published (config.yaml beside auk_base/auk_flash.safetensors and vae.safetensors, no config.json).

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.family import checkpoint_family

MODEL_TYPE = "auk"
UPSTREAM_WEIGHTS = ("auk_base.safetensors", "auk_flash.safetensors", "auk.safetensors")


def is_upstream_dir(path: Path) -> bool:
    return (path / "config.yaml").is_file() and (path / "vae.safetensors").is_file() and any((path / n).is_file() for n in UPSTREAM_WEIGHTS)


# The VAE also encodes the condition stage's reference audio and stays float32.
FAMILY = checkpoint_family("auk", (MODEL_TYPE,), __package__, detect=is_upstream_dir, float32_stages=("decode",))
