"""The PostgreSQL voice store: generations, the pointer swap, the cap, failed uploads, migrations, LISTEN/NOTIFY.

Runs on a temporary cluster of its own (tests/postgres_cluster.py); two store objects stand for two replicas.
"""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import psycopg
import pytest

from tests.postgres_cluster import postgres_bindir, require, start_cluster
from vocalis.server.audio_decoding import DecodedAudio
from vocalis.server.errors import StatusError
from vocalis.server.postgres_voice_store import PostgresVoiceStore
from vocalis.server.voice_store import CANONICAL_RATE, StoreFull, VoiceNotFound
from vocalis.server.voice_store_backend import open_voice_store
from vocalis.server.voice_store_migrations import LATEST, SchemaTooNew, migrate


def audio(seed: int = 0, seconds: float = 1.5, rate: int = 16000) -> DecodedAudio:
    return DecodedAudio(np.random.default_rng(seed).uniform(-0.5, 0.5, int(seconds * rate)).astype(np.float32), rate)


@pytest.fixture(scope="module")
def cluster():
    require("postgresql", postgres_bindir() is not None)
    running = start_cluster()
    yield running
    running.stop()


@pytest.fixture
def url(cluster):
    """A fresh database per test."""
    name = f"t{time.monotonic_ns()}"
    with psycopg.connect(cluster.url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return cluster.url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def replicas(url):
    a, b = PostgresVoiceStore(url, retire_after_s=60), PostgresVoiceStore(url, retire_after_s=60)
    yield a, b
    a.close()
    b.close()


def test_generations_replace_and_delete_across_replicas(replicas):
    a, b = replicas
    first = a.put("Bob", b"original-1", "audio/wav", audio(1), "c1", ref_text="hi")
    assert b.get("bob") == first and b.names() == ["bob"] and b.count() == 1
    clip = b.audio(first)
    assert clip.sample_rate == CANONICAL_RATE and abs(clip.seconds - 1.5) < 1e-3
    assert np.allclose(clip.samples, audio(1).resampled(CANONICAL_RATE).samples)

    second = b.put("BOB", b"original-2", "audio/flac", audio(2), "c2")
    assert int(second.object_id) > int(first.object_id)
    assert a.get("Bob").object_id == second.object_id and a.get("bob").name == "BOB"
    # A request that read the first generation's record before the re-upload still gets that generation's clip.
    assert np.allclose(a.audio(first).samples, clip.samples)
    assert not np.allclose(a.audio(second).samples[: len(clip.samples)], clip.samples)

    assert b.delete("bob").object_id == second.object_id
    with pytest.raises(VoiceNotFound):
        a.get("Bob")
    with pytest.raises(VoiceNotFound):
        a.delete("bob")
    assert a.list() == [] and a.count() == 0


def test_cap_counts_new_names_only(replicas):
    a, b = replicas
    a.put("a", b"1", "audio/wav", audio(), "c", max_voices=2)
    b.put("b", b"2", "audio/wav", audio(), "c", max_voices=2)
    a.put("a", b"3", "audio/wav", audio(), "c", max_voices=2)  # a replacement is not a new voice
    with pytest.raises(StoreFull):
        b.put("c", b"4", "audio/wav", audio(), "c", max_voices=2)
    assert [r.name for r in a.list()] == ["a", "b"]


def test_embedding_voice(replicas):
    a, b = replicas
    record = a.put("emb", b"...", "application/json", None, "c", embedding=np.arange(8, dtype=np.float32))
    assert record.embedding_dim == 8 and record.duration_s == 0
    assert np.array_equal(b.embedding(b.get("emb")), np.arange(8))


def test_failed_upload_leaves_the_current_generation(replicas):
    a, b = replicas
    current = a.put("keep", b"1", "audio/wav", audio(1), "c")
    with pytest.raises(psycopg.Error):  # the database refuses the row half-way through the transaction
        a.put("keep", b"2", "audio/wav", audio(2), "c", ref_text="bad\x00byte")
    assert b.get("keep") == current and b.count() == 1
    assert np.allclose(b.audio(b.get("keep")).samples, audio(1).resampled(CANONICAL_RATE).samples)


def test_retired_generation_leaves_every_replica_cache(replicas):
    a, b = replicas
    record = a.put("cached", b"1", "audio/wav", audio(3), "c")
    a.audio(record)
    b.audio(record)
    assert a.cached_clips[0] == 1 and b.cached_clips[0] == 1
    a.put("cached", b"2", "audio/wav", audio(4), "c")  # retires the first generation: NOTIFY on commit
    deadline = time.monotonic() + 10
    while (a.cached_clips[0] or b.cached_clips[0]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert a.cached_clips == (0, 0) and b.cached_clips == (0, 0)


def test_concurrent_writers_end_in_the_expected_set(replicas):
    a, b = replicas
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        store = (a, b)[index % 2]
        try:
            for round_ in range(3):
                store.put(f"v{index}", f"{index}-{round_}".encode(), "audio/wav", audio(index, seconds=1.0), "c")
            if index % 3 == 0:
                store.delete(f"V{index}")
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert a.names() == sorted(f"v{i}" for i in range(12) if i % 3)


def test_migrations_once_and_refuse_a_newer_schema(url):
    with psycopg.connect(url, autocommit=True) as connection:
        assert migrate(connection) == 0
        assert migrate(connection) == LATEST
        assert connection.execute("SELECT count(*) FROM vocalis_schema_migrations").fetchone()[0] == LATEST
        connection.execute("INSERT INTO vocalis_schema_migrations (version) VALUES (%s)", (LATEST + 1,))
        with pytest.raises(SchemaTooNew, match="upgrade Vocalis"):
            migrate(connection)


def test_store_is_chosen_by_its_location(url, tmp_path):
    from vocalis.server.voice_store import VoiceStore

    assert isinstance(open_voice_store(tmp_path / "voices"), VoiceStore)
    store = open_voice_store(url)
    try:
        assert isinstance(store, PostgresVoiceStore)
    finally:
        store.close()


def test_an_unreachable_database_is_unavailable_not_internal(cluster):
    with pytest.raises(ValueError, match="cannot open the voice store at 127.0.0.1:1/postgres") as refused:
        PostgresVoiceStore("postgresql://vocalis:hunter2@127.0.0.1:1/postgres")
    assert "hunter2" not in str(refused.value)
    own = start_cluster()
    store = PostgresVoiceStore(own.url, wait_s=2)
    try:
        store.put("here", b"1", "audio/wav", audio(), "c")
        own.stop()
        with pytest.raises(StatusError) as caught:
            store.get("here")
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE and caught.value.reason == "VOICE_STORE_UNAVAILABLE"
        assert "hunter2" not in caught.value.message
    finally:
        store.close()
