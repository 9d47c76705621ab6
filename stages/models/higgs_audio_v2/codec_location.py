"""Where a higgs-audio v2 checkpoint keeps its codec (the `higgs_audio_v2_tokenizer`).

In order: an `audio_tokenizer/` directory inside the checkpoint (as OmniVoice ships it, and as vLLM-Omni prefers it);
else the pointer transformers' processor saves, `audio_tokenizer_config.json` or the `audio_tokenizer` entry of
`processor_config.json` (`audio_tokenizer_name_or_path`): a directory (absolute, or relative to the checkpoint) or a
Hub repository, looked up in the Hugging Face cache and downloaded only when missing, as the checkpoint itself is.
"""

from __future__ import annotations

import json
from pathlib import Path

from vocalis.stages.models.hub_checkpoint import looks_like_repo_id, resolve_repo

SUBDIR = "audio_tokenizer"


def codec_dir(path: Path) -> Path:
    inside = path / SUBDIR
    if (inside / "config.json").is_file():
        return inside
    pointer = _pointer(path)
    if pointer is None:
        raise ValueError(
            f"{path}: no codec: neither an {SUBDIR}/ directory (config.json + model.safetensors of a "
            "higgs_audio_v2_tokenizer) nor an audio_tokenizer_config.json / processor_config.json naming one"
        )
    local = Path(pointer) if Path(pointer).is_absolute() else path / pointer
    if (local / "config.json").is_file():
        return local
    if looks_like_repo_id(pointer):
        return resolve_repo(pointer)
    raise ValueError(f"{path}: the codec {pointer!r} it names is neither a directory with a config.json nor a Hub repository")


def _pointer(path: Path) -> str | None:
    for name, key in (("audio_tokenizer_config.json", None), ("processor_config.json", SUBDIR)):
        file = path / name
        if not file.is_file():
            continue
        data = json.loads(file.read_text())
        entry = data.get(key) if key else data
        if isinstance(entry, dict) and entry.get("audio_tokenizer_name_or_path"):
            return str(entry["audio_tokenizer_name_or_path"])
    return None
