"""The voice store on disk: atomic replace, shared views, the cap, nothing left half-written."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from vocalis.server.audio_decoding import DecodedAudio
from vocalis.server.voice_store import CANONICAL_RATE, StoreFull, VoiceNotFound, VoiceStore


def audio(seed: int = 0, seconds: float = 1.5, rate: int = 16000) -> DecodedAudio:
    return DecodedAudio(np.random.default_rng(seed).uniform(-0.5, 0.5, int(seconds * rate)).astype(np.float32), rate)


def test_put_get_replace_delete(tmp_path):
    store = VoiceStore(tmp_path)
    first = store.put("Bob", b"original-1", "audio/wav", audio(1), "c1", ref_text="hi")
    other_process_view = VoiceStore(tmp_path)
    assert other_process_view.get("bob").object_id == first.object_id
    stored = other_process_view.audio(first)
    assert stored.sample_rate == CANONICAL_RATE and abs(stored.seconds - 1.5) < 1e-3

    second = store.put("BOB", b"original-2", "audio/flac", audio(2), "c2")
    assert store.get("bob").object_id == second.object_id and store.get("bob").name == "BOB"
    assert not (tmp_path / "objects" / first.object_id).exists()  # the replaced object is gone
    assert (tmp_path / "objects" / second.object_id / "original.flac").read_bytes() == b"original-2"

    store.delete("bob")
    with pytest.raises(VoiceNotFound):
        other_process_view.get("Bob")
    assert list((tmp_path / "objects").iterdir()) == [] and list((tmp_path / "tmp").iterdir()) == []


def test_cap_counts_new_names_only(tmp_path):
    store = VoiceStore(tmp_path)
    store.put("a", b"1", "audio/wav", audio(), "c", max_voices=2)
    store.put("b", b"2", "audio/wav", audio(), "c", max_voices=2)
    store.put("a", b"3", "audio/wav", audio(), "c", max_voices=2)  # a replacement is not a new voice
    with pytest.raises(StoreFull):
        store.put("c", b"4", "audio/wav", audio(), "c", max_voices=2)
    assert [r.name for r in store.list()] == ["a", "b"]


def test_embedding_voice(tmp_path):
    store = VoiceStore(tmp_path)
    record = store.put("emb", b"...", "application/json", None, "c", embedding=np.arange(8, dtype=np.float32))
    assert record.embedding_dim == 8 and record.duration_s == 0
    assert np.array_equal(store.embedding(record), np.arange(8))


def _churn(args: tuple[str, int]) -> None:
    directory, worker = args
    store = VoiceStore(directory)
    for i in range(10):
        name = f"w{worker}-{i}"
        store.put(name, name.encode(), "audio/wav", audio(i, seconds=1.0), "c")
        store.put("shared", name.encode(), "audio/wav", audio(i, seconds=1.0), "c")  # every process fights over one name
        if i % 2:
            store.delete(name)


def test_processes_sharing_a_store(tmp_path):
    with ProcessPoolExecutor(4) as pool:
        list(pool.map(_churn, [(str(tmp_path), w) for w in range(4)]))
    store = VoiceStore(tmp_path)
    expected = {"shared"} | {f"w{w}-{i}" for w in range(4) for i in range(0, 10, 2)}
    assert {r.name for r in store.list()} == expected
    assert len(list((tmp_path / "objects").iterdir())) == len(expected)  # no orphaned objects
    assert store.audio(store.get("shared")).seconds == pytest.approx(1.0, abs=1e-3)
