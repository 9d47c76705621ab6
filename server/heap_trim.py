"""Freed heap goes back to the OS when the server goes idle (glibc's malloc_trim).

A burst of requests leaves what it freed in glibc's arenas (one per thread that allocated: Piper's lanes, the stage
workers, gRPC's threads), and the RSS stays near the burst's peak until that memory is reused: from one idle moment
to the next it differs by hundreds of MB with nothing held. malloc_trim(0) gives the free pages of every arena back.
The server calls it once it has been idle for `idle_s`, on a thread, not on the event loop; where the C library has no
malloc_trim (musl, macOS) nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

IDLE_S = 0.5
"""How long the server must stay idle before it trims: a client that sends its next request at once does not pay."""


def malloc_trim() -> Callable[[int], int] | None:
    """The C library's malloc_trim, or None where it has none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    def __init__(self, is_idle: Callable[[], bool], trim: Callable[[int], int] | None = None, idle_s: float = IDLE_S) -> None:
        self.is_idle = is_idle
        self.trim = trim
        self.idle_s = idle_s
        self.trims = 0
        self._pending: asyncio.TimerHandle | None = None
        self._running = False

    def went_idle(self) -> None:
        """Called on the event loop when the last session has ended: trim if nothing starts within idle_s."""
        if self.trim is None:
            return
        if self._pending is not None:
            self._pending.cancel()
        self._pending = asyncio.get_running_loop().call_later(self.idle_s, self._start)

    def _start(self) -> None:
        self._pending = None
        if self._running or not self.is_idle():
            return
        self._running = True
        trim = self.trim
        assert trim is not None
        asyncio.get_running_loop().run_in_executor(None, trim, 0).add_done_callback(self._done)

    def _done(self, future: asyncio.Future) -> None:
        self._running = False
        self.trims += 1
        if future.exception() is not None:
            log.warning("malloc_trim failed: %s", future.exception())
