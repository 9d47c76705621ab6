"""Uploaded voices in PostgreSQL: one transactional store shared by every replica on every machine.

Every upload is a new row of `vocalis_voice_generations` (metadata, the original bytes, the decoded
clip and any speaker embedding), and `vocalis_voices` points each lower-case name at its current
generation. An upload writes its generation and moves the pointer in one transaction, so a failed
upload leaves the current generation as it was, and readers see the old voice or the new one.

Pointers are read from the database on every lookup (one indexed row), so an upload or a delete
through any replica is seen by the next request on every other one. What is costly to fetch, the
decoded clip and the embedding, is cached in memory by generation; a generation never changes, so
such a cache cannot serve a stale voice. A replaced or deleted generation stays readable for
`retire_after_s` (a request that read its pointer a moment ago still gets its clip), and its cache
entries are dropped on every replica at once through LISTEN/NOTIFY, so memory goes with it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from vocalis.server.audio_decoding import DecodedAudio
from vocalis.server.errors import StatusError
from vocalis.server.store_outage import Outage
from vocalis.server.voice_store import (
    CANONICAL_RATE,
    NAME_PATTERN,
    DecodedClipCache,
    StoreFull,
    VoiceNotFound,
    VoiceRecord,
)
from vocalis.server.voice_store_migrations import migrate

log = logging.getLogger(__name__)

CHANNEL = "vocalis_voices"
"""NOTIFY channel; payload "retired <generation>"."""
WRITE_LOCK = 0x766F696365  # "voice": advisory lock serialising writers (count check, pointer swap)
RECONNECT_S = 2.0
"""How long the pool retries a lost connection (attempts at 0, 1 and 2 s) before the next call starts afresh."""
CONNECT_TIMEOUT_S = 2
"""libpq's connect_timeout (whole seconds, 2 at least): a host that does not answer at all."""

_RECORD_COLUMNS = (
    "g.name, g.generation, g.consent, g.created_at, g.ref_text, g.description, g.content_hash, g.mime_type, g.duration_s, g.embedding_dim"
)


class PostgresVoiceStore:
    def __init__(
        self, url: str, retire_after_s: float = 300.0, cache_bytes: int = 64 * 2**20, pool_size: int = 4, wait_s: float = 1.0
    ) -> None:
        self.url = url
        self.wait_s = wait_s
        """The longest a call waits for a connection before the store is reported UNAVAILABLE."""
        self.retire_after_s = retire_after_s
        """How long a replaced or deleted generation stays readable by requests that read its pointer before the change."""
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as connection:
                migrate(connection)
        except psycopg.Error as error:
            raise ValueError(f"cannot open the voice store at {describe(url)}: {error}") from None
        # Outages: a call waits at most `wait_s` for a connection; a pooled connection is checked before use (one
        # that died with the server is replaced, not handed out); reconnect attempts back off for at most
        # RECONNECT_S before the pool gives up and the next call starts a fresh one (the default, 5 minutes of
        # doubling delays, kept replicas failing for half a minute after the database was back).
        self._pool = ConnectionPool(
            url, min_size=1, max_size=pool_size, timeout=wait_s, check=ConnectionPool.check_connection,
            reconnect_timeout=RECONNECT_S, kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}, open=True,
            name="vocalis-voices",
        )
        self._outage = Outage(hold_s=wait_s)
        self._cache = DecodedClipCache(cache_bytes)
        self._embeddings: dict[str, np.ndarray | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._listener = threading.Thread(target=self._listen, name="voice-store-listen", daemon=True)
        self._listener.start()
        self._listening.wait(10)

    def close(self) -> None:
        self._stop.set()
        self._listener.join(5)
        self._pool.close()

    # -- reading ------------------------------------------------------------------------

    def list(self) -> list[VoiceRecord]:
        with self._connection() as connection:
            rows = connection.execute(
                f"SELECT {_RECORD_COLUMNS} FROM vocalis_voices v JOIN vocalis_voice_generations g USING (generation) ORDER BY v.name_key"
            ).fetchall()
        return [_record(row) for row in rows]

    def names(self) -> list[str]:
        with self._connection() as connection:
            return [row[0] for row in connection.execute("SELECT name_key FROM vocalis_voices ORDER BY name_key").fetchall()]

    def get(self, name: str) -> VoiceRecord:
        key = _key(name)
        with self._connection() as connection:
            row = connection.execute(
                f"SELECT {_RECORD_COLUMNS} FROM vocalis_voices v JOIN vocalis_voice_generations g USING (generation) WHERE v.name_key = %s",
                (key,),
            ).fetchone()
        if row is None:
            raise VoiceNotFound(name)
        return _record(row)

    def count(self) -> int:
        with self._connection() as connection:
            row = connection.execute("SELECT count(*) FROM vocalis_voices").fetchone()
        return int(row[0]) if row else 0

    def audio(self, record: VoiceRecord) -> DecodedAudio:
        """The decoded clip of `record`'s generation (cached by generation)."""
        cached = self._cache.get(record.object_id)
        if cached is not None:
            return cached
        with self._connection() as connection:
            row = connection.execute(
                "SELECT audio, audio_rate FROM vocalis_voice_generations WHERE generation = %s", (int(record.object_id),)
            ).fetchone()
        if row is None or row[0] is None:
            raise VoiceNotFound(record.name)  # retired longer ago than retire_after_s
        clip = DecodedAudio(np.frombuffer(row[0], dtype="<f4").astype(np.float32), int(row[1]))
        with self._lock:
            self._cache.put(record.object_id, clip)
        return clip

    def embedding(self, record: VoiceRecord) -> np.ndarray | None:
        if not record.embedding_dim:
            return None
        with self._lock:
            if record.object_id in self._embeddings:
                return self._embeddings[record.object_id]
        with self._connection() as connection:
            row = connection.execute("SELECT embedding FROM vocalis_voice_generations WHERE generation = %s", (int(record.object_id),)).fetchone()
        if row is None:
            raise VoiceNotFound(record.name)
        value = None if row[0] is None else np.frombuffer(row[0], dtype="<f4").astype(np.float32)
        with self._lock:
            self._embeddings[record.object_id] = value
        return value

    @property
    def cached_clips(self) -> tuple[int, int]:
        """How many decoded clips this process holds in memory, and their bytes."""
        with self._lock:
            return len(self._cache), self._cache.bytes

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
        """Store a validated voice as a new generation of `name`; the pointer moves only when all of it is written."""
        key = _key(name)
        canonical = audio.resampled(CANONICAL_RATE) if audio is not None else None
        embedding_bytes = None if embedding is None else np.asarray(embedding, dtype="<f4").tobytes()
        with self._writing() as connection:
            current = connection.execute("SELECT generation FROM vocalis_voices WHERE name_key = %s", (key,)).fetchone()
            if current is None and max_voices is not None:
                count = connection.execute("SELECT count(*) FROM vocalis_voices").fetchone()
                if count is not None and count[0] >= max_voices:
                    raise StoreFull(max_voices)
            row = connection.execute(
                """INSERT INTO vocalis_voice_generations
                       (name, name_key, consent, created_at, ref_text, description, content_hash, mime_type, duration_s,
                        embedding_dim, original, audio, audio_rate, embedding)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
                   RETURNING """ + _RECORD_COLUMNS.replace("g.", ""),
                (
                    name, key, consent, time.time(), ref_text, description, hashlib.sha256(original).hexdigest(), mime_type,
                    canonical.seconds if canonical is not None else 0.0,
                    None if embedding is None else int(np.asarray(embedding).size),
                    original,
                    None if canonical is None else np.asarray(canonical.samples, dtype="<f4").tobytes(),
                    None if canonical is None else CANONICAL_RATE,
                    embedding_bytes,
                ),
            ).fetchone()
            assert row is not None
            record = _record(row)
            connection.execute(
                "INSERT INTO vocalis_voices (name_key, generation) VALUES (%s, %s) "
                "ON CONFLICT (name_key) DO UPDATE SET generation = EXCLUDED.generation",
                (key, int(record.object_id)),
            )
            if current is not None:
                self._retire(connection, int(current[0]))
        return record

    def delete(self, name: str) -> VoiceRecord:
        key = _key(name)
        with self._writing() as connection:
            row = connection.execute(
                f"SELECT {_RECORD_COLUMNS} FROM vocalis_voices v JOIN vocalis_voice_generations g USING (generation) "
                "WHERE v.name_key = %s",
                (key,),
            ).fetchone()
            if row is None:
                raise VoiceNotFound(name)
            record = _record(row)
            connection.execute("DELETE FROM vocalis_voices WHERE name_key = %s", (key,))
            self._retire(connection, int(record.object_id))
        return record

    # -- internals ----------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection; the database out of reach is UNAVAILABLE to the caller, not an internal error.
        Within `wait_s` of a failed call, calls fail at once (Outage) rather than each waiting for the pool."""
        if self._outage.recent():
            raise self._unavailable()
        try:
            with self._pool.connection() as connection:
                yield connection
        except (psycopg.OperationalError, PoolTimeout) as error:
            if self._outage.failed():  # one line per outage, not one per call
                log.warning("voice store: PostgreSQL at %s cannot be reached (%s); answering UNAVAILABLE", describe(self.url),
                            str(error).strip() or type(error).__name__)
            raise self._unavailable() from None
        if self._outage.succeeded():
            log.warning("voice store: PostgreSQL at %s reachable again", describe(self.url))

    def _unavailable(self) -> StatusError:
        return StatusError(
            grpc.StatusCode.UNAVAILABLE,
            f"the voice store (PostgreSQL at {describe(self.url)}) cannot be reached; retry shortly",
            "VOICE_STORE_UNAVAILABLE",
            metadata={"retry_after_s": "1"},
        )

    @contextmanager
    def _writing(self) -> Iterator[psycopg.Connection]:
        """A transaction holding the store's write lock, with generations retired long enough ago swept out."""
        with self._connection() as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            connection.execute(
                "DELETE FROM vocalis_voice_generations WHERE retired_at < now() - make_interval(secs => %s)", (self.retire_after_s,)
            )
            yield connection

    def _retire(self, connection: psycopg.Connection, generation: int) -> None:
        connection.execute("UPDATE vocalis_voice_generations SET retired_at = now() WHERE generation = %s", (generation,))
        connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"retired {generation}"))  # delivered on commit

    def _forget(self, object_id: str) -> None:
        with self._lock:
            self._cache.pop(object_id)
            self._embeddings.pop(object_id, None)

    def _listen(self) -> None:
        """Drop cached clips of retired generations as the notifications arrive; reconnect when the connection goes."""
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    while not self._stop.is_set():
                        for notify in connection.notifies(timeout=0.5):
                            kind, _, generation = notify.payload.partition(" ")
                            if kind == "retired":
                                self._forget(generation)
            except psycopg.Error as error:
                # Notifications sent meanwhile are lost: drop every cached clip (a generation never changes, so this
                # only costs a refetch; it keeps retired voices from lingering in memory).
                log.warning("voice store: LISTEN connection lost (%s); reconnecting", error)
                with self._lock:
                    self._cache.clear()
                    self._embeddings.clear()
                self._stop.wait(1.0)


def describe(url: str) -> str:
    """`url` without its password, for messages and logs."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "the configured URL"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def _key(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise VoiceNotFound(name)  # no stored voice can have such a name
    return name.lower()


def _record(row: tuple) -> VoiceRecord:
    name, generation, consent, created_at, ref_text, description, content_hash, mime_type, duration_s, embedding_dim = row
    return VoiceRecord(
        name=name,
        object_id=str(generation),
        consent=consent,
        created_at=float(created_at),
        ref_text=ref_text,
        description=description,
        content_hash=content_hash,
        mime_type=mime_type,
        duration_s=float(duration_s),
        embedding_dim=embedding_dim,
    )
