"""The server gives freed heap back once idle: after idle_s with no session, not while one runs."""

from __future__ import annotations

import asyncio
import platform

import pytest

from vocalis.server.heap_trim import HeapTrimmer, malloc_trim


def test_trims_once_idle_and_not_when_work_came_back():
    calls: list[int] = []
    busy = [False]

    async def go() -> int:
        trimmer = HeapTrimmer(lambda: not busy[0], calls.append, idle_s=0.05)
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
        trimmer = HeapTrimmer(lambda: True, calls.append, idle_s=0.1)
        for _ in range(3):
            trimmer.went_idle()
            await asyncio.sleep(0.05)
        assert calls == []  # each end of a session put it off
        await asyncio.sleep(0.15)
        assert calls == [0]

    asyncio.run(go())


def test_the_c_library_trim_runs_here():
    trim = malloc_trim()
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    assert trim is not None and trim(0) in (0, 1)
