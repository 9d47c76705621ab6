"""An IterativeStage sizes its batches from what its steps cost: a compute-bound step (cost proportional to the batch)
serves requests one after another, first come first served, so the first one's audio comes about when it would alone;
a step whose cost does not grow with the batch batches them all as before."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

STEPS = 6
"""Steps per request; its audio comes out at its last."""


class Done:
    def __init__(self) -> None:
        self.closed = threading.Event()

    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None:
        self.closed.set()


@dataclass(eq=False)
class Job:
    request: SynthesisRequest
    taken: int = 0

    @property
    def done(self) -> bool:
        return self.taken >= STEPS


@dataclass
class Costed(IterativeModel):
    """Each step costs `fixed + per_job · batch` seconds: slept (wall clock), or added to `now` (a fake clock)."""

    fixed: float
    per_job: float
    sleep: bool = True
    now: float = 0.0
    batches: list[list[str]] = field(default_factory=list)

    def start(self, request, payload):
        return Job(request)

    def step(self, jobs):
        cost = self.fixed + self.per_job * len(jobs)
        if self.sleep:
            time.sleep(cost)
        else:
            self.now += cost
        self.batches.append([job.request.text for job in jobs])
        for job in jobs:
            job.taken += 1
        return [[np.zeros(8, dtype=np.float32)] if job.done else [] for job in jobs]


def serve_four(model: Costed, adaptive: bool) -> list[float]:
    """Four requests at once through a one-stage pipeline; each one's time to first audio, in order of submission."""
    pipeline = Pipeline([IterativeStage("gen", model, max_num_seqs=8, adaptive_batching=adaptive)])
    requests = [SynthesisRequest(text=str(i), stage_input=None, output=Done()) for i in range(4)]
    start = time.monotonic()
    for request in requests:
        pipeline.submit(request)
    for request in requests:
        assert request.output.closed.wait(30)
    pipeline.close()
    return [request.first_audio_at - start for request in requests]


def test_a_compute_bound_step_serves_the_queue_one_after_another():
    unit = 0.03  # seconds per job and step: a lone request's audio after STEPS · unit = 0.18 s
    batched = serve_four(Costed(0.0, unit), adaptive=False)
    model = Costed(0.0, unit)
    adaptive = serve_four(model, adaptive=True)
    alone = STEPS * unit
    # before: all four share every step and get their audio together, at about 4 × alone
    assert min(batched) > 3.5 * alone
    # after: request 1 near alone (plus the two steps at two that measured the cost), the rest one by one
    assert adaptive[0] < 1.8 * alone < 0.5 * batched[0]
    assert adaptive == sorted(adaptive)
    assert adaptive[-1] < 1.15 * batched[-1]  # the same throughput: the last is no later than batched
    assert max(len(batch) for batch in model.batches[4:]) <= 2 and [len(b) for b in model.batches[:4]] == [1, 1, 2, 2]


def test_a_step_whose_cost_does_not_grow_with_the_batch_batches_everyone():
    unit = 0.03
    model = Costed(unit, 0.0)
    ttfa = serve_four(model, adaptive=True)
    assert max(len(batch) for batch in model.batches) == 4
    assert max(ttfa) < 0.6 * 4 * STEPS * unit  # well under one after another


def fake_clock_stage(model: Costed) -> IterativeStage:
    return IterativeStage("gen", model, clock=lambda: model.now)


def drain(stage: IterativeStage) -> list[StageItem]:
    items = []
    while stage.has_work():
        items += stage.step()
    return items


def test_held_requests_are_served_in_arrival_order_and_none_starves():
    model = Costed(0.0, 1.0, sleep=False)
    stage = fake_clock_stage(model)
    requests = [SynthesisRequest(text=str(i), stage_input=None, output=Done()) for i in range(5)]
    for request in requests:
        stage.add(StageItem(request))
    finished = [item.request.text for item in drain(stage) if item.finished]
    assert finished == ["0", "1", "2", "3", "4"]
    assert sum(len(batch) for batch in model.batches) == 5 * STEPS


def test_cancelling_the_request_in_service_lets_the_next_one_run():
    model = Costed(0.0, 1.0, sleep=False)
    stage = fake_clock_stage(model)
    first, second, third = (SynthesisRequest(text=str(i), stage_input=None, output=Done()) for i in range(3))
    for request in (first, second, third):
        stage.add(StageItem(request))
    for _ in range(6):  # measured: now one at a time
        stage.step()
    assert stage.batch_requests() == [first]
    first.cancel()
    third.cancel()
    finished = [item.request.text for item in drain(stage) if item.finished]
    assert finished == ["1"] and stage.active_requests() == []
    assert all(batch == ["1"] for batch in model.batches[6:])
