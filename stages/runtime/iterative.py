"""IterativeStage: requests whose work is a series of steps, every running request stepped together.

For models that refine a whole utterance over a fixed number of passes (masked diffusion,
flow matching) rather than emitting one frame per pass: each step advances every running
request by one pass in a single batched call, new requests join between steps, and a
request leaves when its job says it is done. Unlike UtteranceStage (one request per step,
round-robin), a step's cost is shared by its whole batch.

How many ready jobs a step takes is measured, not configured: the stage times its steps per batch size and steps
the number that finishes its queue soonest on average, first come first served. Where one more job costs much of what
it costs alone (a compute-bound step) that is one at a time, so a job's output is not held back by a batch that
cannot raise throughput enough to pay for it; where it costs little, every ready job (step_cost.py). The same trade
across stages: while a later stage works for the requests ahead, this one starts no new job if the later stage's
steps are measured to slow down beside another's so much that starting it would cost the requests ahead more than it
gains (device_share.py); jobs it has started go on, and the pipeline wakes it when that work is done.

It takes a request at any place in a pipeline: its job starts from the request's first item,
whose payload is the output of the stage before (None for stage 0). A job that consumes a stream
(a decoder of units as they arrive) is fed the later outputs and says when it can step (`ready`).

The model does the tensor work; this file is only bookkeeping and can be tested without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vocalis.stages.runtime.device_share import OverlapCost, SteppingClock, should_wait
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.request_table import RequestTable
from vocalis.stages.runtime.stage import CacheStats, StageItem
from vocalis.stages.runtime.step_cost import StepCost


class IterativeJob(Protocol):
    request: SynthesisRequest

    @property
    def done(self) -> bool:
        """No more steps to run (its last output has been returned)."""
        ...


class IterativeModel(Protocol):
    """Subclass it (`class MyModel(IterativeModel)`) for the defaults of the optional `feed`, `ready` and `caches`."""

    def start(self, request: SynthesisRequest, payload: Any) -> IterativeJob:
        """The job of a request, from its first item: `payload` is the output of the stage before, None for stage 0.
        May raise for bad input: that request fails alone."""
        ...

    def step(self, jobs: list[IterativeJob]) -> list[list[Any]]:
        """Advance every job by one step, batched; returns, per job, what it produced (often nothing)."""
        ...

    def feed(self, job: IterativeJob, payload: Any) -> None:
        """A later output of the stage before, for a job it started. By default a job takes its one input at start."""
        raise ValueError(f"{type(self).__name__} takes one input per request")

    def ready(self, job: IterativeJob) -> bool:
        """Whether a step can advance `job` now (False: it waits to be fed). By default always."""
        return True

    def caches(self) -> dict[str, CacheStats]:
        """The model's caches of reusable work by name (its reference clips' encodings), for the metrics; none by
        default."""
        return {}


@dataclass(eq=False)
class _Entry:
    job: IterativeJob
    running: bool = False
    """Stepped before: it goes ahead of jobs that have not started."""

    @property
    def request(self) -> SynthesisRequest:
        return self.job.request


class IterativeStage(RequestTable[_Entry]):
    def __init__(self, name: str, model: IterativeModel, max_num_seqs: int = 8, adaptive_batching: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """`adaptive_batching`: size each step's batch from its measured cost (step_cost.py); False: every ready job
        up to `max_num_seqs`, whatever the cost. `clock` times the steps."""
        super().__init__()
        self.name = name
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.step_cost = StepCost() if adaptive_batching else None
        self._clock = clock
        self.overlap_cost = OverlapCost()
        self._stepping = SteppingClock()
        self._later_slowdown: Callable[[], float | None] = lambda: None
        self.steps = 0

    def overlap_slowdown(self) -> float | None:
        return self.overlap_cost.slowdown()

    def share_device(self, stepping: SteppingClock, later_slowdown: Callable[[], float | None]) -> None:
        self._stepping = stepping
        self._later_slowdown = later_slowdown

    def add(self, item: StageItem) -> None:
        entry = self._entry(item.request)
        if entry is None:
            self._put(_Entry(self.model.start(item.request, item.payload)))
        elif item.payload is not None:
            self.model.feed(entry.job, item.payload)

    def caches(self) -> dict[str, CacheStats]:
        return self.model.caches()

    def has_work(self) -> bool:
        return bool(self._steppable())

    def _steppable(self) -> list[_Entry]:
        """The jobs a step may take, in order: the running ones, then the new ones, unless a later stage works for the
        requests ahead and its measured overlap slowdown says that starting one now would cost them more than it
        gains (device_share.should_wait)."""
        ready = [entry for entry in self._entries.values() if self.model.ready(entry.job)]
        running = [entry for entry in ready if entry.running]
        new = [entry for entry in ready if not entry.running]
        if new and should_wait(self._later_slowdown(), len(new)):
            return running
        return running + new

    def step(self) -> list[StageItem]:
        self.drop_closed()
        batch = self._steppable()[: self.max_num_seqs]
        if self.step_cost is not None:
            batch = batch[: self.step_cost.batch_limit(len(batch))]
        jobs = [entry.job for entry in batch]
        self._batch = [job.request for job in jobs]
        if not jobs:
            return []
        for entry in batch:
            entry.running = True
        started, mark = self._clock(), self._stepping.mark()
        produced = self.model.step(jobs)
        seconds = self._clock() - started
        if len(jobs) == 1:
            self.overlap_cost.record(seconds, self._stepping.beside_since(mark))
        if self.step_cost is not None:
            self.step_cost.record(len(jobs), seconds)
        self.steps += 1
        outputs: list[StageItem] = []
        for job, payloads in zip(jobs, produced, strict=True):
            for i, payload in enumerate(payloads):
                outputs.append(StageItem(job.request, payload, finished=job.done and i == len(payloads) - 1))
            if job.done:
                if not payloads:
                    outputs.append(StageItem(job.request, None, finished=True))
                self.drop(job.request)
        return outputs
