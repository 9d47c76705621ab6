"""The voice store on disk: atomic replace, shared views, the cap, nothing left half-written."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from vocalis.server.audio_decoding import DecodedAudio
from vocalis.server.voice_store import CANONICAL_RATE, StoreFull, VoiceNotFound, VoiceStore


def audio(seed: int = 0, seconds: float = 1.5, rate: int = 16000) -> DecodedAudio:
    return DecodedAudio(np.random.default_rng(seed).uniform(-0.5, 0.5, int(seconds * rate)).astype(np.float32), rate)


def test_put_get_replace_delete(tmp_path):
    store = VoiceStore(tmp_path, retire_after_s=0)
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
    store = VoiceStore(directory, retire_after_s=0)
    for i in range(10):
        name = f"w{worker}-{i}"
        store.put(name, name.encode(), "audio/wav", audio(i, seconds=1.0), "c")
        store.put("shared", name.encode(), "audio/wav", audio(i, seconds=1.0), "c")  # every process fights over one name
        if i % 2:
            store.delete(name)


def test_processes_sharing_a_store(tmp_path):
    with ProcessPoolExecutor(4) as pool:
        list(pool.map(_churn, [(str(tmp_path), w) for w in range(4)]))
    store = VoiceStore(tmp_path, retire_after_s=0)
    expected = {"shared"} | {f"w{w}-{i}" for w in range(4) for i in range(0, 10, 2)}
    assert {r.name for r in store.list()} == expected
    assert len(list((tmp_path / "objects").iterdir())) == len(expected)  # no orphaned objects
    assert store.audio(store.get("shared")).seconds == pytest.approx(1.0, abs=1e-3)


def test_replaced_object_stays_readable_for_a_reader_that_read_the_old_pointer(tmp_path):
    writer, reader = VoiceStore(tmp_path, retire_after_s=0.5), VoiceStore(tmp_path, retire_after_s=0.5)
    writer.put("v", b"1", "audio/wav", audio(1), "c")
    seen = reader.get("v")  # another process has just read the pointer...
    writer.put("v", b"2", "audio/wav", audio(2), "c")  # ...when the voice is re-uploaded
    assert reader.audio(seen).seconds == pytest.approx(1.5, abs=1e-3)
    assert reader.get("v").object_id != seen.object_id
    time.sleep(0.6)
    writer.put("other", b"3", "audio/wav", audio(3), "c")  # the next change sweeps what was retired long enough ago
    assert not (tmp_path / "objects" / seen.object_id).exists()
    assert {p.name for p in (tmp_path / "objects").iterdir()} == {writer.get("v").object_id, writer.get("other").object_id}


def _reupload_forever(directory: str, stop_at: float) -> int:
    store = VoiceStore(directory)
    count = 0
    while time.monotonic() < stop_at:
        store.put("busy", b"x", "audio/wav", audio(count % 5, seconds=1.0), "c")
        count += 1
    return count


def test_reupload_never_makes_a_voice_unknown_to_another_process(tmp_path):
    VoiceStore(tmp_path).put("busy", b"x", "audio/wav", audio(0, seconds=1.0), "c")
    stop_at = time.monotonic() + 4.0
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        uploads = pool.submit(_reupload_forever, str(tmp_path), stop_at)
        reader = VoiceStore(tmp_path, cache_bytes=1)
        reads = misses = 0
        while time.monotonic() < stop_at:
            try:
                record = reader.get("busy")
                time.sleep(0.01)  # a busy server: the pointer is read, the clip opened a moment later
                clip = reader.audio(record)
                assert clip.seconds == pytest.approx(1.0, abs=1e-3)
                reads += 1
            except VoiceNotFound:
                misses += 1
        assert uploads.result() > 10
    assert reads > 10 and misses == 0


def test_decoded_clip_cache_is_bounded(tmp_path):
    clip_bytes = int(1.5 * CANONICAL_RATE) * 4
    store = VoiceStore(tmp_path, cache_bytes=3 * clip_bytes)
    for i in range(12):
        store.put("again", str(i).encode(), "audio/wav", audio(i), "c")  # every re-upload is a new generation
        store.audio(store.get("again"))
        store.put(f"v{i}", b"x", "audio/wav", audio(i), "c")
        store.audio(store.get(f"v{i}"))
    assert store.cached_clips == (3, 3 * clip_bytes)
    assert store.audio(store.get("again")).seconds == pytest.approx(1.5, abs=1e-3)


def _stage_then_hang(directory: str, ready) -> None:  # noqa: ANN001
    import soundfile

    def hang(*args, **kwargs) -> None:  # noqa: ANN002, ANN003
        ready.set()
        time.sleep(600)

    soundfile.write = hang  # the upload stops half-staged, as if killed while writing the clip
    VoiceStore(directory).put("half", b"x", "audio/wav", audio(), "c")


def test_start_up_removes_staging_of_killed_writers_only(tmp_path):
    VoiceStore(tmp_path)
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    writer = context.Process(target=_stage_then_hang, args=(str(tmp_path), ready))
    writer.start()
    try:
        assert ready.wait(60)
        assert any((tmp_path / "tmp").iterdir())
        VoiceStore(tmp_path)  # another process starts while the upload is live: its staging stays
        assert {p.suffix for p in (tmp_path / "tmp").iterdir()} == {"", ".lock"}
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
    (tmp_path / "objects" / ("0" * 32)).mkdir()  # an object published but never pointed at (killed in between)
    store = VoiceStore(tmp_path, retire_after_s=0)
    assert list((tmp_path / "tmp").iterdir()) == [] and list((tmp_path / "objects").iterdir()) == []
    with pytest.raises(VoiceNotFound):
        store.get("half")
