"""The shared reference-clip helpers: one resampler and a content-keyed cache."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.runtime.stage import CacheStats


def test_resample_keeps_duration_and_tone():
    t = np.arange(8000) / 8000
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    up = resample(tone, 8000, 24000)
    assert up.dtype == np.float32 and len(up) == 24000
    spectrum = np.abs(np.fft.rfft(up))
    assert abs(np.argmax(spectrum) - 440) <= 1  # 1 s of audio: bin = Hz
    assert resample(tone, 8000, 8000) is not None and np.array_equal(resample(tone, 8000, 8000), tone)


def test_equal_content_shares_an_entry_and_the_oldest_is_evicted():
    clip = np.linspace(-1, 1, 100, dtype=np.float32)
    assert content_key(clip, 16000) == content_key(clip.copy(), 16000)
    assert content_key(clip, 16000) != content_key(clip, 24000) != content_key(clip, 16000, "codes")
    cache: ReferenceCache[str] = ReferenceCache(capacity=2)
    made = []

    def make(value):
        made.append(value)
        return value

    assert cache.get_or_make("a", lambda: make("A")) == "A"
    assert cache.get_or_make("a", lambda: make("again")) == "A"
    cache.get_or_make("b", lambda: make("B"))
    cache.get("a")  # a is now the most recent
    cache.get_or_make("c", lambda: make("C"))
    assert made == ["A", "B", "C"] and cache.get("b") is None and cache.get("a") == "A" and len(cache) == 2


def test_the_cache_is_safe_from_several_threads():
    cache: ReferenceCache[int] = ReferenceCache(capacity=8)
    errors = []

    def work(offset):
        try:
            for i in range(500):
                cache.get_or_make(str((i + offset) % 20), lambda i=i: i)
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(cache) == 8


@dataclass
class Encoding:
    """A cached encoding as families keep them: tensors and arrays in fields, a list of them, and other data."""

    embedding: torch.Tensor
    codes: np.ndarray
    more: list[np.ndarray]
    label: str


def test_the_cache_counts_hits_misses_and_the_bytes_it_holds():
    cache: ReferenceCache[object] = ReferenceCache(capacity=2)
    tensor = torch.zeros(3, 4)  # 48 bytes
    encoding = Encoding(tensor, np.zeros(10, np.float32), [np.zeros(2, np.float64)], "label")  # 48 + 40 + 16
    cache.get_or_make("a", lambda: encoding)
    cache.get_or_make("a", lambda: pytest.fail("a hit makes nothing"))
    cache.get_or_make("b", lambda: np.zeros(5, np.int16))  # 10 bytes
    assert cache.stats() == CacheStats(hits=1, misses=2, entries=2, nbytes=104 + 10)
    cache.get_or_make("c", lambda: tensor)  # "a" is the oldest: out
    assert cache.stats() == CacheStats(hits=1, misses=3, entries=2, nbytes=10 + 48)
    cache.put("c", np.zeros(1, np.int8))  # replaced: its old bytes are not counted twice
    assert cache.stats().nbytes == 10 + 1 and not cache.has("a")
