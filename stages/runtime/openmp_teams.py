"""Let an idle thread's OpenMP team go, so that the thread still computing keeps its team awake between ops.

torch's CPU builds run their parallel ops on GNU OpenMP. Every thread that runs one keeps a team of
`torch.get_num_threads()` threads for as long as it lives; between parallel regions the team spins briefly, so the
next region starts at once. But once the process holds more OpenMP threads than CPUs, libgomp spins only ~100 times
before it puts a team thread to sleep, and every parallel region then pays a futex wake-up. In this server every
stage worker is a thread with its own team, and the thread that loaded the weights keeps one too: on two cores
two teams are already too many, and a decode step of ~740 parallel matmuls paid ~50 ms for it
(bench/omp_region_cost.py, BENCHMARKS.md).

`release_team()` hands the calling thread's team threads back (OpenMP 5.0's `omp_pause_resource_all`, soft: in
libgomp it frees only the calling thread's pool). A stage worker calls it when it goes idle, the pipeline when it
has started its workers (on the thread that loaded the weights), and a pooled thread handed torch work (a voice
encoder, the forced aligner's load) after it, so a team lives only while its thread computes: a lone busy stage has
its team to itself, and two busy at once still share the cores politely. The next parallel op makes a new team
(one pthread_create and its first op: ~0.4 ms, which is why a worker waits TEAM_GRACE_S idle first). Only GNU OpenMP
is touched, the runtime this was measured on; elsewhere (LLVM's or Intel's OpenMP, no torch) it does nothing.

The other side of it: a team that spins between regions spends those spins on the cores whoever else needs them.
Inside the server that is the same trade torch makes for any one-thread program; a second busy process on the same
cores (two pytest workers on two cores: the unit suite ran ~10 % longer with this) loses to it. There,
`OMP_WAIT_POLICY=PASSIVE` makes every team thread sleep at once, as all of them did before; the test suite sets it
(tests/conftest.py).
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

OMP_PAUSE_SOFT = 1


def _gnu_openmp() -> ctypes.CDLL | None:
    """The libgomp torch has loaded, or None (no torch yet: a Piper-only server, or torch imported later)."""
    return _loaded_gnu_openmp() if "torch" in sys.modules else None


@cache
def _loaded_gnu_openmp() -> ctypes.CDLL | None:
    """The one libgomp this process has loaded (the same handle: dlopen of a loaded path returns it), or None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = {line.split()[-1] for line in maps.splitlines() if "/libgomp" in line}
    if len(paths) != 1:  # none loaded, or two runtimes: which one torch's ops use is not known
        return None
    library = ctypes.CDLL(paths.pop())
    if not hasattr(library, "omp_pause_resource_all"):  # before OpenMP 5.0 (GCC 9)
        return None
    library.omp_pause_resource_all.argtypes = [ctypes.c_int]
    library.omp_pause_resource_all.restype = ctypes.c_int
    return library


def release_team() -> bool:
    """Let the calling thread's OpenMP team threads go; whether there was a runtime to ask. Must not be called from
    inside a parallel region (no caller here is)."""
    library = _gnu_openmp()
    if library is None:
        return False
    if library.omp_pause_resource_all(OMP_PAUSE_SOFT) != 0:
        log.debug("omp_pause_resource_all refused")
    return True


def then_release(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """fn(*args, **kwargs), then release_team() on the same thread: for torch work run on a pooled thread."""
    try:
        return fn(*args, **kwargs)
    finally:
        release_team()
