"""Precomputed voices: prepared by the operator, loaded at start-up, listed and usable, never deleted.

`--custom-voice-dir DIR` names a directory with a manifest.json:
    {"voices": [{"name": "narrator", "audio": "narrator.wav", "ref_text": "...",
                 "description": "...", "models": ["model-a"], "speaker_embedding": "narrator.npy"}]}
`audio` and every `*.npy` value (speaker_embedding, ref_codes, ...: model artifacts, by key) are
paths relative to DIR (audio or an artifact is needed);
`models` restricts which loaded models may use the voice (default: every model that clones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vocalis.server.audio_decoding import DecodedAudio, decode_audio
from vocalis.server.voice_store import NAME_PATTERN


@dataclass(frozen=True)
class PrecomputedVoice:
    name: str
    audio: DecodedAudio | None
    ref_text: str | None = None
    description: str | None = None
    models: tuple[str, ...] = ()
    """Empty: any model that can clone."""
    artifacts: dict[str, np.ndarray] = field(default_factory=dict)


def load_precomputed(directory: Path) -> list[PrecomputedVoice]:
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        entries = manifest["voices"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{manifest_path}: expected a JSON object with a 'voices' list ({error})") from error
    voices = []
    for entry in entries:
        name = entry.get("name", "")
        if not NAME_PATTERN.fullmatch(name):
            raise ValueError(f"{manifest_path}: bad voice name {name!r}")
        audio = decode_audio(_file(directory, entry["audio"]).read_bytes()) if entry.get("audio") else None
        # Every `<key>: <file>.npy` is an artifact under that key (speaker_embedding, ref_codes, latents, ...).
        artifacts = {
            key: np.load(_file(directory, value))
            for key, value in entry.items()
            if isinstance(value, str) and value.endswith(".npy")
        }
        if audio is None and not artifacts:
            raise ValueError(f"{manifest_path}: voice {name!r} needs audio or a .npy artifact such as speaker_embedding")
        voices.append(
            PrecomputedVoice(
                name=name,
                audio=audio,
                ref_text=entry.get("ref_text"),
                description=entry.get("description"),
                models=tuple(entry.get("models", ())),
                artifacts=artifacts,
            )
        )
    return voices


def _file(directory: Path, relative: str) -> Path:
    path = (directory / relative).resolve()
    if not path.is_relative_to(directory.resolve()):
        raise ValueError(f"{relative!r} lies outside {directory}")
    return path
