"""The in-process pipeline of one loaded model: its stage workers and their inbox."""

from __future__ import annotations

import queue

from vocalis.stages.request import SynthesisRequest
from vocalis.stages.stage import UtteranceStage
from vocalis.stages.worker import StageWorker


class Pipeline:
    """One utterance stage served by `num_workers` threads sharing an inbox."""

    def __init__(self, stage: UtteranceStage, num_workers: int = 1) -> None:
        self._inbox: queue.Queue[SynthesisRequest | None] = queue.Queue()
        self._workers = [
            StageWorker(stage, self._inbox, name=f"{stage.name}-{i}") for i in range(num_workers)
        ]
        for worker in self._workers:
            worker.start()

    def submit(self, request: SynthesisRequest) -> None:
        self._inbox.put(request)

    @property
    def queued(self) -> int:
        """Requests waiting for a worker."""
        return self._inbox.qsize()

    @property
    def running(self) -> int:
        """Requests a worker is serving now."""
        return sum(worker.busy for worker in self._workers)

    def close(self, timeout: float = 5.0) -> None:
        for _ in self._workers:
            self._inbox.put(None)
        for worker in self._workers:
            worker.join(timeout)
