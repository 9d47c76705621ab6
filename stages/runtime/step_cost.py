"""How many of a stage's ready requests to step together, from what its steps have cost at each batch size.

Batching pays when a step's cost is mostly per-step overhead (a tiny model, a GPU with idle lanes): one more request
in the batch costs little, so every request in it finishes sooner than it would waiting its turn. When the step is
compute-bound (a large model on a few CPU cores), one more request costs nearly what it would cost alone, and a batch
makes every request in it wait as long as the slowest would. For a stage whose output is a request's finished job (an
utterance refined over all its steps), what a caller waits for is the time its job finishes; so the stage picks the
batch size that finishes the queue it holds soonest on average, and never one that does worse than serving it one
request after another (batch size 1 is always a candidate).

The stage measures, at run time, the wall time of its steps per batch size (the median of the last few, robust to a
hiccup on a shared machine), fits t(b) = a + c·b, and reads r = c / t(1): what one more request costs against running
it alone, so that t(b) = t(1)·(1 + r·(b - 1)). Served first come first served in groups of b, n equal jobs finish on
average at t(b)·mean_k ceil(k / b) steps' worth of time; the stage steps the b in 1..n that makes that least. Two
ready requests are batched only where r ≤ 1/2; four go in pairs where 1/3 < r < 2/3 and all together below 1/3. At
r = 0.8, which OmniVoice's generator measured on two quiet cores, batching raises throughput by ~11 % but finishes
every queue later on average than one after another, so the stage serves one at a time. A step whose cost barely
grows (r near 0) batches every ready request.
Held requests keep their state and wait; none starves, the head always progresses, and a cancelled head frees its
turn at once.

Until two batch sizes are measured the stage grows its batch one request at a time (1, then 2) to measure them; while
it holds at one, every `recheck_every` steps it runs one step at two so that a hiccup cannot lock it into holding. It
leaves its last choice only for one that the costs say is better by more than `margin` of the expected time: on a
loaded machine the r of a compute-bound step scatters by ±0.3 (bench/adaptive_batching.py), and a flip mid-queue gives
the waiting requests' wait to the one in service. No per-family setting: the same rule reads each stage's own costs
on its own device. Torch-free.

Across stages the pipeline weighs the same trade with what a stage's steps cost beside another stage's
(device_share.py).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque

log = logging.getLogger(__name__)


def mean_finish(ready: int, size: int, ratio: float) -> float:
    """The mean time at which `ready` equal jobs finish, served first come first served in groups of `size`, in units
    of a lone job's time, when one more job in a step costs `ratio` of a step alone."""
    groups = sum(math.ceil(k / size) for k in range(1, ready + 1)) / ready
    return (1 + ratio * (size - 1)) * groups


class StepCost:
    """One stage's step costs per batch size, and the batch size they call for (see the module docstring)."""

    def __init__(self, window: int = 5, min_samples: int = 2, recheck_every: int = 16, margin: float = 0.1) -> None:
        if min_samples < 1 or window < min_samples:
            raise ValueError("need 1 <= min_samples <= window")
        if not 0 <= margin < 1:
            raise ValueError("margin must be in [0, 1)")
        self.window = window
        self.min_samples = min_samples
        self.recheck_every = recheck_every
        self.margin = margin
        self._chosen: int | None = None
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
            return math.inf  # the line runs through (about) zero: all cost, no overhead
        return slope / alone

    def best_size(self, ready: int) -> int | None:
        """The batch size for `ready` requests that the measured costs call for (None: not measured yet); it stays at
        its last choice unless another finishes the queue sooner by more than `margin`."""
        ratio = self.marginal_ratio()
        if ratio is None:
            return None
        finish = {size: mean_finish(ready, size, ratio) for size in range(1, ready + 1)}
        best = min(finish, key=lambda size: (finish[size], -size))  # on a tie, the larger batch: more throughput
        last = None if self._chosen is None else min(self._chosen, ready)
        if last is not None and last != best and finish[best] > (1 - self.margin) * finish[last]:
            best = last
        if best != self._chosen:
            log.debug("step cost r=%.2f (%s): stepping %d of %d ready", ratio,
                      {s: round(t, 4) for s, t in self.measured().items()}, best, ready)
        self._chosen = best
        return best

    def batch_limit(self, ready: int) -> int:
        """How many of `ready` requests (in first-come order) to step now."""
        if ready <= 1:
            return ready
        best = self.best_size(ready)
        if best is None:
            measured = self.measured()
            # grow one at a time until two sizes are measured: 1, then 2
            return min(ready, next(size for size in range(1, ready + 1) if size not in measured))
        if best > 1:
            self._held_steps = 0
            return best
        self._held_steps += 1
        if self._held_steps >= self.recheck_every:
            self._held_steps = 0
            return 2
        return 1
