"""Uploaded voices on a directory, shared by every server process that points at it.

Layout under the store's directory:
    objects/<id>/original.<ext>   the file as uploaded
    objects/<id>/audio.wav        decoded: mono float32 at CANONICAL_RATE
    objects/<id>/meta.json        name, consent, created_at, ref_text, description, hash, mime type
    names/<name>.json             the pointer from a (lower-case) name to its object, and the metadata
    retired/<id>                  an object no pointer names any more, and since when (its mtime)
    tmp/<id>/, tmp/<id>.lock      an upload being staged, and the flock its writer holds meanwhile
    .lock                         taken (flock) around every change

An object is written completely before its pointer, and a pointer is replaced with
os.replace, so readers in any process see either the old voice or the new one,
never half of either. A re-upload only swaps the pointer once the new clip has
passed every check. Listing reads the pointers from disk each time, so an upload
through one process is visible through all of them at once.

A replaced or deleted object stays on disk for `retire_after_s` (a reader in another
process may have read the old pointer a moment ago and be about to open it), then
goes at the next change. Staging left by a writer killed mid-upload (its flock is
gone with it) is removed when a store opens the directory.
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
from collections import OrderedDict
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
    def __init__(self, directory: Path, retire_after_s: float = 300.0, cache_bytes: int = 64 * 2**20) -> None:
        self.directory = Path(directory)
        self._objects = self.directory / "objects"
        self._names = self.directory / "names"
        self._tmp = self.directory / "tmp"
        self._retired = self.directory / "retired"
        for path in (self._objects, self._names, self._tmp, self._retired):
            path.mkdir(parents=True, exist_ok=True)
        self.retire_after_s = retire_after_s
        """How long a replaced or deleted object stays readable by processes that read its pointer before the change."""
        self._cache = DecodedClipCache(cache_bytes)
        self._clean_staging()
        with self._locked():
            self._retire_orphans()
            self._sweep_retired()

    def close(self) -> None:
        """Nothing to release: every call opens and closes what it uses."""

    # -- reading ------------------------------------------------------------------------

    def list(self) -> list[VoiceRecord]:
        records = []
        for pointer in sorted(self._names.glob("*.json")):
            record = self._read_pointer(pointer)
            if record is not None:
                records.append(record)
        return records

    def names(self) -> list[str]:
        """The lower-case names of every stored voice, sorted (reads no metadata)."""
        return sorted(pointer.stem for pointer in self._names.glob("*.json"))

    def get(self, name: str) -> VoiceRecord:
        record = self._read_pointer(self._pointer(name))
        if record is None:
            raise VoiceNotFound(name)
        return record

    def count(self) -> int:
        return sum(1 for _ in self._names.glob("*.json"))

    def audio(self, record: VoiceRecord) -> DecodedAudio:
        """The decoded clip (cached in memory by object id: objects never change, a re-upload is a new id)."""
        cached = self._cache.get(record.object_id)
        if cached is None:
            path = self._objects / record.object_id / "audio.wav"
            try:
                samples, rate = sf.read(path, dtype="float32")
            except (sf.LibsndfileError, FileNotFoundError) as error:
                raise VoiceNotFound(record.name) from error  # retired longer ago than retire_after_s
            cached = DecodedAudio(samples, int(rate))
            self._cache.put(record.object_id, cached)
        return cached

    @property
    def cached_clips(self) -> tuple[int, int]:
        """How many decoded clips this process holds in memory, and their bytes."""
        return len(self._cache), self._cache.bytes

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
        with self._staging_lock(object_id):
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
                        self._retire(previous.object_id)
                    self._sweep_retired()
                return record
            finally:
                shutil.rmtree(staging, ignore_errors=True)

    def delete(self, name: str) -> VoiceRecord:
        with self._locked():
            record = self._read_pointer(self._pointer(name))
            if record is None:
                raise VoiceNotFound(name)
            self._pointer(name).unlink()
            self._retire(record.object_id)
            self._sweep_retired()
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

    def _retire(self, object_id: str) -> None:
        """No pointer names `object_id` any more; it goes once no reader can still be about to open it."""
        (self._retired / object_id).touch()
        self._cache.pop(object_id)

    def _sweep_retired(self) -> None:
        """Remove objects retired longer than retire_after_s ago (called with the store locked)."""
        cutoff = time.time() - self.retire_after_s
        for marker in self._retired.iterdir():
            try:
                if marker.stat().st_mtime <= cutoff:
                    shutil.rmtree(self._objects / marker.name, ignore_errors=True)
                    marker.unlink()
            except FileNotFoundError:
                pass

    def _retire_orphans(self) -> None:
        """Objects that no pointer names and nobody retired: a writer was killed between publishing and pointing."""
        named = {record.object_id for record in self.list()}
        retired = {marker.name for marker in self._retired.iterdir()}
        for path in self._objects.iterdir():
            if path.name not in named and path.name not in retired:
                self._retire(path.name)

    def _clean_staging(self) -> None:
        """Remove staging whose writer is gone: its flock is free (or it never took one, or never got to stage)."""
        for entry in self._tmp.iterdir():
            object_id = entry.name.split(".", 1)[0]
            try:
                with self._staging_lock(object_id, blocking=False):
                    shutil.rmtree(self._tmp / object_id, ignore_errors=True)
                    (self._tmp / f"{object_id}.pointer").unlink(missing_ok=True)
            except BlockingIOError:
                continue  # a live writer in another process

    @contextmanager
    def _staging_lock(self, object_id: str, blocking: bool = True) -> Iterator[None]:
        """Held by the writer of tmp/<object_id> for as long as that staging exists."""
        path = self._tmp / f"{object_id}.lock"
        while True:
            lock = open(path, "a+")  # noqa: SIM115 - held across the yield below
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                lock.close()
                raise
            try:
                current = os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino
            except FileNotFoundError:
                current = False
            if current:
                break
            lock.close()  # a cleaner removed the file between our open and our flock: take the new one
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
            lock.close()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.directory / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class DecodedClipCache:
    """The most recently used decoded clips by object id, up to `max_bytes` of samples (a 30 s clip is 2.9 MB).

    Keyed by object id, so a re-upload (a new id) never serves a stale clip, and the old one just ages out.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, DecodedAudio] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, object_id: str) -> DecodedAudio | None:
        clip = self._entries.get(object_id)
        if clip is not None:
            self._entries.move_to_end(object_id)
        return clip

    def put(self, object_id: str, clip: DecodedAudio) -> None:
        self.pop(object_id)
        self._entries[object_id] = clip
        self.bytes += clip.samples.nbytes
        while self.bytes > self.max_bytes and len(self._entries) > 1:
            self.pop(next(iter(self._entries)))

    def pop(self, object_id: str) -> None:
        clip = self._entries.pop(object_id, None)
        if clip is not None:
            self.bytes -= clip.samples.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0


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
