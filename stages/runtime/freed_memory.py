"""Giving freed heap memory back to the OS (glibc's malloc_trim): what the server's idle trim calls, and what a load
calls while it replaces weights, so that the memory freed by one replaced weight does not stay resident beside the
next one's. Torch-free: the Piper-only install imports it."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def malloc_trim() -> Callable[[int], int] | None:
    """The C library's malloc_trim, or None where it has none (musl, macOS); looked up once (a load calls it per
    replaced weight)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def give_back_freed() -> None:
    """Return the free pages of every arena to the OS; nothing where the C library cannot."""
    trim = malloc_trim()
    if trim is not None:
        trim(0)
