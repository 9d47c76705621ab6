"""What every family does with a reference clip before encoding it: resample it, and keep the encoding.

Encodings (a speaker embedding, codec codes, VAE latents) are expensive and a session's utterances,
or a stored voice used again, share one clip; `ReferenceCache` keeps them by the clip's content, so
that two equal clips from different requests share one entry and nothing is tied to object identity.
It is safe to use from several stage threads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np

from vocalis.stages.runtime.stage import CacheStats

ValueT = TypeVar("ValueT")

DEFAULT_CAPACITY = 64
"""Encodings kept per cache: enough for every concurrent clone session of a busy server."""


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Mono float32 `samples` at `rate` Hz, resampled to `target` Hz (soxr, high quality)."""
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    if rate == target:
        return samples
    import soxr

    return soxr.resample(samples, rate, target, quality="HQ").astype(np.float32)


def content_key(samples: np.ndarray, rate: int, *settings: object) -> str:
    """A key for a clip's content at a rate, plus whatever settings change its encoding."""
    digest = hashlib.sha1(np.ascontiguousarray(samples, dtype=np.float32).tobytes())
    digest.update(repr((rate, *settings)).encode())
    return digest.hexdigest()


def value_nbytes(value: object) -> int:
    """The bytes of the tensors and arrays a cached encoding holds (in dataclass fields, sequences and mappings)."""
    torch = sys.modules.get("torch")  # a tensor's module is loaded; Piper's server never imports it
    if isinstance(value, np.ndarray) or torch is not None and isinstance(value, torch.Tensor):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = vars(value)
        return sum(value_nbytes(fields[f.name]) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return sum(value_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(value_nbytes(v) for v in value.values())
    return 0


class ReferenceCache(Generic[ValueT]):
    """A thread-safe LRU of encodings by content key, counting its hits and misses and the bytes it holds (its
    `stats()`: the stage caches in /metrics)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a reference cache keeps at least one entry")
        self.capacity = capacity
        self._entries: OrderedDict[str, ValueT] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._hits = self._misses = self._nbytes = 0

    def get(self, key: str) -> ValueT | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def has(self, key: str) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: str, value: ValueT) -> None:
        size = value_nbytes(value)
        with self._lock:
            self._nbytes += size - self._sizes.get(key, 0)
            self._entries[key], self._sizes[key] = value, size
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                old, _ = self._entries.popitem(last=False)
                self._nbytes -= self._sizes.pop(old)

    def get_or_make(self, key: str, make: Callable[[], ValueT]) -> ValueT:
        """The cached value (a hit), or `make()` (a miss; run outside the lock: encoding is slow) kept and returned."""
        value = self.get(key)
        hit = value is not None
        if value is None:
            value = make()
            self.put(key, value)
        with self._lock:
            if hit:
                self._hits += 1
            else:
                self._misses += 1
        return value

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(hits=self._hits, misses=self._misses, entries=len(self._entries), nbytes=self._nbytes)

    def caches(self) -> dict[str, CacheStats]:
        """This cache as its holder's stage reports it (`caches()` of a preparer or a stage model): every family's
        clip encodings under one name."""
        return {"references": self.stats()}

    def __len__(self) -> int:
        return len(self._entries)
