"""What a stage's step costs when other stages of its pipeline step at the same time, measured.

Every stage of a pipeline has its own worker thread, so two stages may step at once. Where a step leaves part of the
device idle (a GPU's spare lanes, a step that waits on Python or runs one thread), that overlap is free and the
pipeline gains from it. Where one step already fills the device (a large model on two CPU cores), the two steps share
it: each takes up to twice as long, and work started early for a later request comes out of the time of the request
ahead of it. Which of the two a device is, is read from the steps themselves: the pipeline's `SteppingClock` knows how
much of a step's wall time other stages spent stepping beside it, and a stage's `OverlapCost` compares its steps that
ran beside others with those that ran alone: s, how many times longer a step takes beside another one.

A stage before such a stage decides with s whether to start a new request while it works (`should_wait`). With the
request ahead needing l of the device's time in the later stage and the new one u in this one, side by side they
overlap m = min(u, l) of it at 1/s of their speed: each cycle takes u + l − m·(2 − s) instead of u + l, and the head
loses m·(s − 1). With one such overlap a cycle (u ≥ l), the mean time to first audio of n requests served first come
first served is lower side by side only while s < 2 − 2 / (n + 1): 1.33 for two requests, 1.6 for four. Where this
stage gets ahead of the later one (u < l) the break-even is s ≈ 1.5 whatever n. The rule takes the lower of the two,
so that the stages run side by side only where that is no worse for the queue than one after another
(tests/stages/runtime/test_cross_stage_admission.py checks it against a simulated device). Torch-free.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable


class SteppingClock:
    """How many of a pipeline's stages are stepping, integrated over time (shared by the pipeline's workers)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._stepping = 0
        self._integral = 0.0
        self._since = clock()

    def _advance(self) -> float:
        now = self._clock()
        self._integral += self._stepping * (now - self._since)
        self._since = now
        return now

    def begin(self) -> None:
        """A worker starts a step."""
        with self._lock:
            self._advance()
            self._stepping += 1

    def end(self) -> None:
        """A worker's step is over."""
        with self._lock:
            self._advance()
            self._stepping -= 1

    def mark(self) -> tuple[float, float]:
        """A point to measure from (called by a stage inside its own step)."""
        with self._lock:
            now = self._advance()
            return now, self._integral

    def beside_since(self, mark: tuple[float, float]) -> float:
        """The share (0 to 1) of the wall time since `mark` during which another stage stepped, for a caller that has
        been stepping all along."""
        with self._lock:
            now = self._advance()
        elapsed = now - mark[0]
        if elapsed <= 0:
            return 0.0
        others = self._integral - mark[1] - elapsed
        return min(max(others / elapsed, 0.0), 1.0)


ALONE = 0.1
"""A step with less than this share of its time beside another stage's counts as alone."""
BESIDE = 0.3
"""A step with at least this share beside another's tells how much the other slows it."""


class OverlapCost:
    """One stage's steps of one request, alone and beside other stages' steps, and the slowdown s they show."""

    def __init__(self, window: int = 5, min_samples: int = 2) -> None:
        self.min_samples = min_samples
        self._alone: deque[float] = deque(maxlen=window)
        self._beside: deque[tuple[float, float]] = deque(maxlen=window)
        self._slowdown: float | None = None

    def record(self, seconds: float, beside: float) -> None:
        """A step of one request took `seconds`, a share `beside` of them with another stage stepping."""
        if beside < ALONE:
            self._alone.append(seconds)
        elif beside >= BESIDE:
            self._beside.append((seconds, beside))
        self._slowdown = self._estimate()

    def _estimate(self) -> float | None:
        if len(self._alone) < self.min_samples or len(self._beside) < self.min_samples:
            return None
        alone = statistics.median(self._alone)
        # a step beside others for a share f of its time, at 1/s of its speed there: t = alone / (1 - f + f / s)
        estimates = []
        for seconds, share in self._beside:
            slowed = 1 / max(seconds / alone, 1e-9) - 1 + share
            estimates.append(share / slowed if slowed > 0 else float("inf"))
        return max(statistics.median(estimates), 1.0)

    def slowdown(self) -> float | None:
        """s: how many times longer a step takes beside another stage's than alone; None until measured. Read from
        other stages' threads (a float set at each record)."""
        return self._slowdown


BREAK_EVEN_AHEAD = 1.5
"""The slowdown past which side by side loses for the queue when the stage before gets ahead of the later one."""


def should_wait(slowdown: float | None, queued: int) -> bool:
    """Whether a stage should hold a new request back while a later stage, whose steps take `slowdown` times longer
    beside another's, works for the request ahead; `queued` requests wait to start. Unmeasured: never."""
    if slowdown is None:
        return False
    requests = queued + 1  # the new ones and the one ahead
    return slowdown >= min(BREAK_EVEN_AHEAD, 2 - 2 / (requests + 1))
