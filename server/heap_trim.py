"""Freed heap is kept for reuse while the server is busy and goes back to the OS when it goes idle (glibc).

While busy: by default glibc serves every block above a sliding threshold (128 KiB up to 32 MiB) with its own
mmap and unmaps it when freed, and gives the top of a heap back once 128 KiB of it is free. A model whose runs
allocate and free large buffers every time then page-faults its way through fresh zeroed memory on each run:
Piper's ONNX runs (its CPU arena is off, voice.py) took ~1.25x as long on two threads and ~1.1x on one as with the
blocks kept (bench/heap_reuse.py, medians of 3 fresh processes each). keep_freed_heap() has such blocks come from the heap and stay there when freed
(mmap only above 32 MiB, glibc's largest threshold; no trim of a heap's top below 1 GiB), so the next run reuses them.

A burst of requests leaves what it freed in glibc's arenas (one per thread that allocated: Piper's lanes, the stage
workers, gRPC's threads), and the RSS stays near the burst's peak until that memory is reused: from one idle moment
to the next it differs by hundreds of MB with nothing held. malloc_trim(0) gives the free pages of every arena back.
The server calls it once it has been idle for `idle_s` (`serve --heap-trim-after`, 60 s), on a thread, not on the
event loop; where the C library has no malloc_trim (musl, macOS) nothing is done.

A trim costs the next request: what it gives back, that request faults in again. After a 12 s pause, a short Piper
prompt took 1.26x Piper's own server's time when the pause had ended in a trim, 1.06x when it had not (median of 6,
one request per server in turn); in bench/piper_side_by_side.py's closed runs, whose servers idle 10-30 s between
runs, the first two requests of each run took 1.2-1.5x with a 10 s delay. Hence the two conditions: a minute with no
session (traffic that pauses for less keeps its heap; what counts against a memory limit is the peak, not the rest),
and an RSS grown `grown_bytes` (`serve --heap-trim-above`, 256 MiB) past what it was after the last trim (or when the
trimmer was made), so that sporadic requests of the usual sizes keep their few hundred MB while what a burst of long
ones left still goes back.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 1024 * 1024
"""Blocks at least this large still get their own mapping (the largest threshold glibc accepts on 64-bit)."""
TRIM_THRESHOLD = 1024 * 1024 * 1024
"""Free memory at a heap's top that glibc keeps while busy; the idle trim gives it back."""


def resident_bytes() -> int | None:
    """This process's resident set size (Linux /proc), or None where it cannot be read."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def keep_freed_heap() -> bool:
    """Have glibc keep freed large blocks for reuse (see the module docstring); False where it cannot (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


class HeapTrimmer:
    def __init__(
        self,
        is_idle: Callable[[], bool],
        trim: Callable[[int], int] | None,
        idle_s: float,
        grown_bytes: int,
        resident: Callable[[], int | None] = resident_bytes,
    ) -> None:
        """Trim with `trim` once idle for `idle_s` and the RSS (`resident`) is `grown_bytes` above where the last
        trim (or this constructor) left it; where `resident` gives None, on every idle."""
        self.is_idle = is_idle
        self.trim = trim
        self.idle_s = idle_s
        self.grown_bytes = grown_bytes
        self.resident = resident
        self.trims = 0
        self._floor = resident()
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
        now = self.resident()
        if now is not None and self._floor is not None and now - self._floor < self.grown_bytes:
            return  # what it holds, the next request would only fault in again
        self._running = True
        trim = self.trim
        assert trim is not None
        asyncio.get_running_loop().run_in_executor(None, trim, 0).add_done_callback(self._done)

    def _done(self, future: asyncio.Future) -> None:
        self._running = False
        self.trims += 1
        self._floor = self.resident()
        if future.exception() is not None:
            log.warning("malloc_trim failed: %s", future.exception())
