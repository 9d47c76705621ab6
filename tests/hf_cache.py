"""A Hugging Face cache laid out on disk, as `hf download` leaves it, for serving checkpoints by repo id offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REVISION = "0123456789abcdef0123456789abcdef01234567"


def add_to_cache(home: Path, repo_id: str, checkpoint: Path, generation: dict | None = None) -> Path:
    """Put `checkpoint` into the cache under HF_HOME `home` as the snapshot `refs/main` points to; the snapshot dir.

    `generation`: keys merged into the copy's generation_config.json (a short default max_new_tokens for tests)."""
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    shutil.copytree(checkpoint, snapshot)  # symlinks followed: a self-contained snapshot
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    if generation:
        path = snapshot / "generation_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **generation}))
    return snapshot


def offline_env(home: Path) -> dict[str, str]:
    return {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
