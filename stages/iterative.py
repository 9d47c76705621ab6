"""IterativeStage: requests whose work is a series of steps, every running request stepped together.

For models that refine a whole utterance over a fixed number of passes (masked diffusion,
flow matching) rather than emitting one frame per pass: each step advances every running
request by one pass in a single batched call, new requests join between steps, and a
request leaves when its job says it is done. Unlike UtteranceStage (one request per step,
round-robin), a step's cost is shared by its whole batch.

The model does the tensor work; this file is only bookkeeping and can be tested without one.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

from vocalis.stages.request import SynthesisRequest
from vocalis.stages.stage import StageItem


class IterativeJob(Protocol):
    request: SynthesisRequest

    @property
    def done(self) -> bool:
        """No more steps to run (its last output has been returned)."""
        ...


class IterativeModel(Protocol):
    def start(self, request: SynthesisRequest) -> IterativeJob:
        """The job of a new request (may raise for bad input: that request fails alone)."""
        ...

    def step(self, jobs: list[IterativeJob]) -> list[list[Any]]:
        """Advance every job by one step, batched; returns, per job, what it produced (often nothing)."""
        ...


class IterativeStage:
    def __init__(self, name: str, model: IterativeModel, max_num_seqs: int = 8) -> None:
        self.name = name
        self.model = model
        self.max_num_seqs = max_num_seqs
        self._waiting: OrderedDict[int, IterativeJob] = OrderedDict()
        self._running: OrderedDict[int, IterativeJob] = OrderedDict()
        self._batch: list[SynthesisRequest] = []
        self.steps = 0

    def add(self, item: StageItem) -> None:
        if item.payload is not None:
            raise ValueError(f"stage {self.name} takes new requests only")
        self._waiting[id(item.request)] = self.model.start(item.request)

    def has_work(self) -> bool:
        return bool(self._waiting or self._running)

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def active_requests(self) -> list[SynthesisRequest]:
        return [job.request for job in (*self._waiting.values(), *self._running.values())]

    def drop(self, request: SynthesisRequest) -> None:
        self._waiting.pop(id(request), None)
        self._running.pop(id(request), None)

    def drop_closed(self) -> None:
        for job in [*self._waiting.values(), *self._running.values()]:
            if job.request.closed:
                self.drop(job.request)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        while self._waiting and len(self._running) < self.max_num_seqs:
            key, job = self._waiting.popitem(last=False)
            self._running[key] = job
        jobs = list(self._running.values())
        self._batch = [job.request for job in jobs]
        if not jobs:
            return []
        produced = self.model.step(jobs)
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
