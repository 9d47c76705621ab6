"""The in-process pipeline of one loaded model: its stages, each on its own worker thread, chained."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from vocalis.stages.runtime.device_share import SteppingClock
from vocalis.stages.runtime.openmp_teams import release_team
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import CacheStats, Stage, StageItem
from vocalis.stages.runtime.worker import StageWorker


class Pipeline:
    """Stage 0 takes new requests; each stage's outputs feed the next; the last one emits audio."""

    def __init__(self, stages: list[Stage]) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.stages = stages
        self.workers: list[StageWorker] = []
        next_worker = None
        for stage in reversed(stages):
            next_worker = StageWorker(stage, next_worker)
            self.workers.insert(0, next_worker)
        stepping = SteppingClock()
        for i, worker in enumerate(self.workers):
            # A stage may hold a new request while a later one works for the requests ahead, where their steps are
            # measured to slow down beside another's (device_share.py); it is woken when that work is done.
            worker.stepping = stepping
            worker.stage.share_device(stepping, partial(_slowest_busy, self.workers[i + 1:]))
            worker.on_free = partial(_wake, self.workers[:i])
        for worker in self.workers:
            worker.start()
        release_team()  # the weights were loaded on this thread: its team is not needed now (openmp_teams)

    def observe(self, observer: Callable[[str, int], None]) -> None:
        """Call `observer(stage_name, batch_size)` after every step of every stage."""
        for worker in self.workers:
            worker.observer = observer

    def running(self) -> dict[str, int]:
        """Requests each stage holds now (running sequences, streams being decoded, utterances)."""
        return {stage.name: len(stage.active_requests()) for stage in self.stages}

    def caches(self) -> dict[tuple[str, str], CacheStats]:
        """Each stage's caches of reusable work, by (stage name, cache name)."""
        return {(stage.name, cache): stats for stage in self.stages for cache, stats in stage.caches().items()}

    def submit(self, request: SynthesisRequest) -> None:
        request.on_cancel(self._wake_all)
        self.workers[0].put([StageItem(request)])

    def _wake_all(self) -> None:
        _wake(self.workers)

    def close(self, timeout: float = 5.0) -> None:
        for worker in self.workers:
            worker.stop(timeout)


def _slowest_busy(workers: list[StageWorker]) -> float | None:
    """The largest overlap slowdown among `workers` that have work now; None: none measured."""
    return max((s for s in (worker.busy_slowdown() for worker in workers) if s is not None), default=None)


def _wake(workers: list[StageWorker]) -> None:
    for worker in workers:
        worker.wake()
