"""A model spec that names a Hugging Face Hub repository, turned into a local checkpoint directory.

`vocalis serve Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice` works as `vllm serve` does: the repo is
looked up in the local Hugging Face cache first (HF_HOME / HF_HUB_CACHE, the
`models--org--name/snapshots/<revision>/` layout that `refs/main` points into), and
downloaded only when it is not there, downloads are allowed (HF_HUB_OFFLINE unset) and
the Hub can be reached. Every failure says which of those it was.
"""

from __future__ import annotations

import re
from pathlib import Path

# The Hub's own rule for repo ids: an optional namespace, a name, no leading/trailing '-' or '.'.
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


def looks_like_repo_id(spec: str) -> bool:
    """Whether `spec` can only mean a Hub repository (an `org/name` that is not a local path)."""
    return "/" in spec and _REPO_ID.match(spec) is not None and not Path(spec).exists() and ".." not in spec


def resolve_repo(repo_id: str) -> Path:
    """The local snapshot directory of `repo_id`: from the cache, else downloaded; ValueError saying why not."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    where = f"the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if constants.HF_HUB_OFFLINE:
        raise ValueError(
            f"cannot load model {repo_id!r}: it is not a local directory, not in {where}, "
            "and HF_HUB_OFFLINE is set, so it cannot be downloaded; download it first "
            f"(`hf download {repo_id}`) or give a checkpoint directory"
        )
    try:
        return Path(snapshot_download(repo_id))
    except RepositoryNotFoundError:
        raise ValueError(f"cannot load model {repo_id!r}: no such repository on the Hugging Face Hub (or it needs a token: HF_TOKEN)") from None
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        raise ValueError(
            f"cannot load model {repo_id!r}: it is not a local directory, not in {where}, "
            f"and downloading it failed ({type(error).__name__}: {error})"
        ) from None
