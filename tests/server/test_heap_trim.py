"""The server keeps freed heap for reuse while busy and gives it back once idle: after idle_s with no session, not
while one runs, and only once the RSS has grown past where the last trim left it."""

from __future__ import annotations

import asyncio
import ctypes
import json
import platform
import subprocess
import sys

import pytest

from vocalis.server.heap_trim import HeapTrimmer, resident_bytes
from vocalis.stages.runtime.freed_memory import malloc_trim


def test_trims_once_idle_and_not_when_work_came_back():
    calls: list[int] = []
    busy = [False]

    async def go() -> int:
        trimmer = HeapTrimmer(lambda: not busy[0], calls.append, idle_s=0.05, grown_bytes=0)
        trimmer.went_idle()
        await asyncio.sleep(0.2)
        assert calls == [0] and trimmer.trims == 1
        busy[0] = True  # a session started within idle_s: no trim
        trimmer.went_idle()
        await asyncio.sleep(0.2)
        return len(calls)

    assert asyncio.run(go()) == 1


def test_went_idle_again_restarts_the_wait():
    calls: list[int] = []

    async def go() -> None:
        trimmer = HeapTrimmer(lambda: True, calls.append, idle_s=0.1, grown_bytes=0)
        for _ in range(3):
            trimmer.went_idle()
            await asyncio.sleep(0.05)
        assert calls == []  # each end of a session put it off
        await asyncio.sleep(0.15)
        assert calls == [0]

    asyncio.run(go())


def test_trims_only_once_the_rss_has_grown_past_the_last_trim():
    calls: list[int] = []
    mib = 1024 * 1024
    rss = [500 * mib]

    def trim(pad: int) -> int:
        calls.append(pad)
        rss[0] = 520 * mib  # what malloc_trim leaves: the next floor
        return 1

    async def go() -> None:
        trimmer = HeapTrimmer(lambda: True, trim, idle_s=0.02, grown_bytes=256 * mib, resident=lambda: rss[0])
        rss[0] = 700 * mib  # 200 MiB above the floor at start: what the next request would reuse
        trimmer.went_idle()
        await asyncio.sleep(0.1)
        assert calls == []
        rss[0] = 800 * mib  # 300 MiB above it: a burst's leftovers
        trimmer.went_idle()
        await asyncio.sleep(0.1)
        assert calls == [0] and trimmer.trims == 1
        rss[0] = 700 * mib  # 180 MiB above the floor the trim left (520)
        trimmer.went_idle()
        await asyncio.sleep(0.1)
        assert calls == [0]
        rss[0] = 780 * mib  # 260 above it
        trimmer.went_idle()
        await asyncio.sleep(0.1)
        assert calls == [0, 0]

    asyncio.run(go())


def test_trims_on_every_idle_where_the_rss_cannot_be_read():
    calls: list[int] = []

    async def go() -> None:
        trimmer = HeapTrimmer(lambda: True, calls.append, idle_s=0.02, grown_bytes=256 * 1024 * 1024, resident=lambda: None)
        for _ in range(2):
            trimmer.went_idle()
            await asyncio.sleep(0.1)

    asyncio.run(go())
    assert calls == [0, 0]


def test_the_rss_reads_here():
    if platform.system() != "Linux":
        pytest.skip("read from /proc")
    assert resident_bytes() > 10 * 1024 * 1024  # an interpreter with this test suite loaded


def test_the_c_library_trim_runs_here():
    trim = malloc_trim()
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    assert trim is not None and trim(0) in (0, 1)


_KEPT_BLOCK = """
import ctypes, json
from vocalis.server.heap_trim import keep_freed_heap

libc = ctypes.CDLL(None)
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
kept = keep_freed_heap()
before = libc.mallinfo2()
block = libc.malloc(16 << 20)
mapped = libc.mallinfo2().hblks - before.hblks
libc.free(block)
print(json.dumps({"kept": kept, "mapped": mapped, "free_growth": libc.mallinfo2().fordblks - before.fordblks}))
"""


def test_a_kept_heap_serves_a_large_block_itself_and_keeps_it_when_freed():
    """What keep_freed_heap() is for: a 16 MB buffer (a Piper run's) neither gets its own mapping nor goes back to
    the OS when freed, so the next run reuses its pages. A fresh process: the settings are process-wide."""
    if malloc_trim() is None or not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("glibc 2.33 or later")
    out = subprocess.run([sys.executable, "-c", _KEPT_BLOCK], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["kept"] is True
    assert result["mapped"] == 0
    assert result["free_growth"] >= 16 << 20
