"""IterativeStage: requests whose work is a series of steps, every running request stepped together.

For models that refine a whole utterance over a fixed number of passes (masked diffusion,
flow matching) rather than emitting one frame per pass: each step advances every running
request by one pass in a single batched call, new requests join between steps, and a
request leaves when its job says it is done. Unlike UtteranceStage (one request per step,
round-robin), a step's cost is shared by its whole batch.

The model does the tensor work; this file is only bookkeeping and can be tested without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.request_table import RequestTable
from vocalis.stages.runtime.stage import StageItem


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


@dataclass(eq=False)
class _Entry:
    job: IterativeJob
    running: bool = False

    @property
    def request(self) -> SynthesisRequest:
        return self.job.request


class IterativeStage(RequestTable[_Entry]):
    def __init__(self, name: str, model: IterativeModel, max_num_seqs: int = 8) -> None:
        super().__init__()
        self.name = name
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.steps = 0

    def add(self, item: StageItem) -> None:
        if item.payload is not None:
            raise ValueError(f"stage {self.name} takes new requests only")
        self._put(_Entry(self.model.start(item.request)))

    def has_work(self) -> bool:
        return bool(self._entries)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        running = [entry for entry in self._entries.values() if entry.running]
        for entry in self._each():
            if len(running) >= self.max_num_seqs:
                break
            if not entry.running:
                entry.running = True
                running.append(entry)
        jobs = [entry.job for entry in running]
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
