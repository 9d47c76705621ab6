"""How many of a stage's ready requests to step together, from what its steps have cost at each batch size.

Batching pays when a step's cost is mostly per-step overhead (a tiny model, a GPU with idle lanes): one more request
in the batch costs little, so throughput grows. When the step is compute-bound (a large model on a few CPU cores),
one more request costs about what it would cost alone: throughput stays the same, and batching only makes every
request in the batch wait as long as the slowest would. For a stage whose first output is a request's finished job
(an utterance refined over all its steps), serving such a queue one after another gives request k its output at k
solo times instead of every request at n: the same throughput, a better time to first audio for all but the last.

So the stage measures, at run time, the wall time of its steps per batch size (the median of the last few, robust
to a hiccup on a shared machine), fits t(b) = a + c·b, and reads r = c / t(1): what one more request costs against
running it alone. With that cost, batching n requests raises throughput by n / (1 + (n - 1)·r), at most 1 / r at any
n. r ≥ `compute_bound_at` (default 0.9: batching could add at most ~11 %) is compute-bound: the stage then steps one
request at a time, first come first served (the others keep their state and wait; none starves, the head always
progresses, and a cancelled head frees its turn at once). Below it the stage batches as before. Between r = 1/2 and
the threshold batching still gives a later mean time to a finished job (n equal jobs batched all finish at
(1 - r + r·n)·T, one after another on average at (n + 1)/2·T), but more throughput; the rule keeps the throughput,
so a stage where batching helps at all is batched as before.

Until two batch sizes are measured the stage grows its batch one request at a time (1, then 2) to measure them; while
it holds, every `recheck_every` steps it runs one step at two so that a hiccup cannot lock it into holding. Once
holding it goes back to batching only below `compute_bound_at - hysteresis` (0.7): on a loaded machine the r of a
compute-bound step scatters by ±0.3 (bench/adaptive_batching.py), and a flip back to batching mid-queue gives the
waiting requests' wait to the one in service. No per-family setting: the same rule reads each stage's own costs on
its own device. Torch-free.
"""

from __future__ import annotations

import statistics
from collections import deque


class StepCost:
    """One stage's step costs per batch size, and the batch size they call for (see the module docstring)."""

    def __init__(self, compute_bound_at: float = 0.9, window: int = 5, min_samples: int = 2,
                 recheck_every: int = 16, hysteresis: float = 0.2) -> None:
        if compute_bound_at <= 0:
            raise ValueError("compute_bound_at must be positive")
        if min_samples < 1 or window < min_samples:
            raise ValueError("need 1 <= min_samples <= window")
        self.compute_bound_at = compute_bound_at
        self.window = window
        self.min_samples = min_samples
        self.recheck_every = recheck_every
        self.hysteresis = hysteresis
        self._holding = False
        self._samples: dict[int, deque[float]] = {}
        self._held_steps = 0

    def record(self, size: int, seconds: float) -> None:
        """A step of `size` requests took `seconds`."""
        if size < 1:
            return
        self._samples.setdefault(size, deque(maxlen=self.window)).append(seconds)

    def measured(self) -> dict[int, float]:
        """The median step time at each batch size with enough samples."""
        return {size: statistics.median(times) for size, times in sorted(self._samples.items())
                if len(times) >= self.min_samples}

    def marginal_ratio(self) -> float | None:
        """r = c / t(1) of the fitted t(b) = a + c·b: one more request's cost against its cost alone. None until two
        batch sizes are measured."""
        points = self.measured()
        if len(points) < 2:
            return None
        sizes, times = list(points), list(points.values())
        fit = statistics.linear_regression(sizes, times)
        slope, alone = fit.slope, fit.intercept + fit.slope
        if slope <= 0:
            return 0.0
        if alone <= 0:
            return float("inf")  # the line runs through (about) zero: all cost, no overhead
        return slope / alone

    def compute_bound(self) -> bool | None:
        """Whether batching cannot raise throughput (None: not measured yet); judged with the hysteresis of the
        last answer, which it remembers."""
        ratio = self.marginal_ratio()
        if ratio is None:
            return None
        self._holding = ratio >= self.compute_bound_at - (self.hysteresis if self._holding else 0.0)
        return self._holding

    def batch_limit(self, ready: int) -> int:
        """How many of `ready` requests (in first-come order) to step now."""
        if ready <= 1:
            return ready
        bound = self.compute_bound()
        if bound is None:
            measured = self.measured()
            # grow one at a time until two sizes are measured: 1, then 2
            return min(ready, next(size for size in range(1, ready + 1) if size not in measured))
        if not bound:
            self._held_steps = 0
            return ready
        self._held_steps += 1
        if self._held_steps >= self.recheck_every:
            self._held_steps = 0
            return 2
        return 1
