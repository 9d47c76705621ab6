"""What every family does with a reference clip before encoding it: resample it, and keep the encoding.

Encodings (a speaker embedding, codec codes, VAE latents) are expensive and a session's utterances,
or a stored voice used again, share one clip; `ReferenceCache` keeps them by the clip's content, so
that two equal clips from different requests share one entry and nothing is tied to object identity.
It is safe to use from several stage threads.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np

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


class ReferenceCache(Generic[ValueT]):
    """A thread-safe LRU of encodings by content key."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a reference cache keeps at least one entry")
        self.capacity = capacity
        self._entries: OrderedDict[str, ValueT] = OrderedDict()
        self._lock = threading.Lock()

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
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def get_or_make(self, key: str, make: Callable[[], ValueT]) -> ValueT:
        """The cached value, or `make()` (run outside the lock: encoding is slow) kept and returned."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
