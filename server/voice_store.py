"""Uploaded voices on a directory, shared by every server process that points at it.

Layout under the store's directory:
    objects/<id>/original.<ext>   the file as uploaded
    objects/<id>/audio.wav        decoded: mono float32 at CANONICAL_RATE
    objects/<id>/meta.json        name, consent, created_at, ref_text, description, hash, mime type
    names/<name>.json             the pointer from a (lower-case) name to its object, and the metadata
    .lock                         taken (flock) around every change

An object is written completely before its pointer, and a pointer is replaced with
os.replace, so readers in any process see either the old voice or the new one,
never half of either. A re-upload only swaps the pointer once the new clip has
passed every check. Listing reads the pointers from disk each time, so an upload
through one process is visible through all of them at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalis.server.audio_decoding import DecodedAudio

CANONICAL_RATE = 24000
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A voice name: also a file name, so nothing else may appear in one."""


@dataclass(frozen=True)
class VoiceRecord:
    """What the store knows about one uploaded voice."""

    name: str
    """As uploaded (case kept); looked up case-insensitively."""
    object_id: str
    consent: str
    created_at: float
    ref_text: str | None
    description: str | None
    content_hash: str
    """sha256 of the original upload."""
    mime_type: str
    duration_s: float
    embedding_dim: int | None = None
    """Length of the speaker embedding when the voice is an embedding, not a clip."""


class VoiceNotFound(KeyError):
    pass


class VoiceStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._objects = self.directory / "objects"
        self._names = self.directory / "names"
        self._tmp = self.directory / "tmp"
        for path in (self._objects, self._names, self._tmp):
            path.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, DecodedAudio] = {}

    # -- reading ------------------------------------------------------------------------

    def list(self) -> list[VoiceRecord]:
        records = []
        for pointer in sorted(self._names.glob("*.json")):
            record = self._read_pointer(pointer)
            if record is not None:
                records.append(record)
        return records

    def get(self, name: str) -> VoiceRecord:
        record = self._read_pointer(self._pointer(name))
        if record is None:
            raise VoiceNotFound(name)
        return record

    def count(self) -> int:
        return sum(1 for _ in self._names.glob("*.json"))

    def audio(self, record: VoiceRecord) -> DecodedAudio:
        """The decoded clip (cached in memory by object id: objects never change)."""
        cached = self._cache.get(record.object_id)
        if cached is None:
            path = self._objects / record.object_id / "audio.wav"
            try:
                samples, rate = sf.read(path, dtype="float32")
            except (sf.LibsndfileError, FileNotFoundError) as error:
                raise VoiceNotFound(record.name) from error  # deleted by another process meanwhile
            cached = self._cache[record.object_id] = DecodedAudio(samples, int(rate))
        return cached

    def embedding(self, record: VoiceRecord) -> np.ndarray | None:
        path = self._objects / record.object_id / "embedding.npy"
        return np.load(path) if path.is_file() else None

    # -- writing ------------------------------------------------------------------------

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
    ) -> VoiceRecord:
        """Store a validated voice under `name`, replacing any voice of that name only at the end."""
        object_id = uuid.uuid4().hex
        staging = self._tmp / object_id
        staging.mkdir()
        try:
            suffix = _SUFFIXES.get(mime_type, "bin")
            (staging / f"original.{suffix}").write_bytes(original)
            duration = 0.0
            if audio is not None:
                canonical = audio.resampled(CANONICAL_RATE)
                sf.write(staging / "audio.wav", canonical.samples, CANONICAL_RATE, subtype="FLOAT")
                duration = canonical.seconds
            if embedding is not None:
                np.save(staging / "embedding.npy", embedding.astype(np.float32))
            record = VoiceRecord(
                name=name,
                object_id=object_id,
                consent=consent,
                created_at=time.time(),
                ref_text=ref_text,
                description=description,
                content_hash=hashlib.sha256(original).hexdigest(),
                mime_type=mime_type,
                duration_s=duration,
                embedding_dim=None if embedding is None else int(embedding.size),
            )
            (staging / "meta.json").write_text(json.dumps(asdict(record)))
            with self._locked():
                previous = self._read_pointer(self._pointer(name))
                if previous is None and max_voices is not None and self.count() >= max_voices:
                    raise StoreFull(max_voices)
                os.replace(staging, self._objects / object_id)
                self._write_pointer(record)
            if previous is not None:
                shutil.rmtree(self._objects / previous.object_id, ignore_errors=True)
            return record
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def delete(self, name: str) -> VoiceRecord:
        with self._locked():
            record = self._read_pointer(self._pointer(name))
            if record is None:
                raise VoiceNotFound(name)
            self._pointer(name).unlink()
        shutil.rmtree(self._objects / record.object_id, ignore_errors=True)
        self._cache.pop(record.object_id, None)
        return record

    # -- internals ----------------------------------------------------------------------

    def _pointer(self, name: str) -> Path:
        if not NAME_PATTERN.fullmatch(name):
            raise VoiceNotFound(name)  # no stored voice can have such a name
        return self._names / f"{name.lower()}.json"

    def _read_pointer(self, path: Path) -> VoiceRecord | None:
        try:
            return VoiceRecord(**json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def _write_pointer(self, record: VoiceRecord) -> None:
        temp = self._tmp / f"{record.object_id}.pointer"
        temp.write_text(json.dumps(asdict(record)))
        os.replace(temp, self._pointer(record.name))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.directory / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class StoreFull(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the voice store is full ({limit} voices); delete one first")
        self.limit = limit


_SUFFIXES = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
    "audio/ogg": "ogg",
    "audio/opus": "opus",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "aac",
    "audio/webm": "webm",
    "application/json": "json",
}
