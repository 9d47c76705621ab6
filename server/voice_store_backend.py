"""The one interface every voice store offers, and the choice between them by `--voice-store`.

Two backends: a local directory (`VoiceStore`, the default: one machine, any number of
processes) and PostgreSQL (`PostgresVoiceStore`: any number of machines). The catalog,
the Voices service and the resolver see only this interface.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from vocalis.server.audio_decoding import DecodedAudio
from vocalis.server.voice_store import VoiceRecord, VoiceStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class VoiceStoreBackend(Protocol):
    """Uploaded voices shared by every process pointed at the same store.

    A record names one immutable generation of a voice (`VoiceRecord.object_id`): a re-upload is a new generation,
    so whoever read a record keeps reading that voice's clip and artefacts even if the name moves on meanwhile.
    """

    def list(self) -> list[VoiceRecord]: ...
    def names(self) -> list[str]: ...
    def get(self, name: str) -> VoiceRecord: ...
    def count(self) -> int: ...
    def audio(self, record: VoiceRecord) -> DecodedAudio: ...
    def embedding(self, record: VoiceRecord) -> np.ndarray | None: ...

    @property
    def cached_clips(self) -> tuple[int, int]: ...

    def put(
        self,
        name: str,
        original: bytes,
        mime_type: str,
        audio: DecodedAudio | None,
        consent: str,
        ref_text: str | None = None,
        description: str | None = None,
        embedding: np.ndarray | None = None,
        max_voices: int | None = None,
    ) -> VoiceRecord: ...

    def delete(self, name: str) -> VoiceRecord: ...
    def close(self) -> None: ...


def is_postgres_url(location: str) -> bool:
    return location.startswith(POSTGRES_SCHEMES)


def open_voice_store(location: str | Path, timeout_s: float = 1.0) -> VoiceStoreBackend:
    """The store at `location`: a postgresql:// URL (calls wait at most `timeout_s` for it), or a directory (created if missing)."""
    if isinstance(location, str) and is_postgres_url(location):
        from vocalis.server.postgres_voice_store import PostgresVoiceStore  # psycopg only when asked for

        return PostgresVoiceStore(location, wait_s=timeout_s)
    return VoiceStore(Path(location))
