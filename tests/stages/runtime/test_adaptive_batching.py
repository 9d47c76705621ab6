"""An IterativeStage sizes its batches from what its steps cost: a compute-bound step (cost proportional to the batch)
serves requests one after another, first come first served, so the first one's audio comes about when it would alone;
a step whose cost does not grow with the batch batches them all as before."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

STEPS = 6
"""Steps per request; its audio comes out at its last."""


class Timed:
    """An output that notes the model's clock when its audio comes and says when its request ended."""

    def __init__(self, model: Costed) -> None:
        self.model = model
        self.audio_at: float | None = None
        self.closed = threading.Event()

    def put_audio(self, samples) -> None:
        if self.audio_at is None:
            self.audio_at = self.model.now

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
    """Each step costs `fixed + per_job · batch` seconds of a fake clock, `now`, which the stage times its steps by:
    the costs are exact whatever the machine's load."""

    fixed: float
    per_job: float
    now: float = 0.0
    batches: list[list[str]] = field(default_factory=list)

    def start(self, request, payload):
        return Job(request)

    def step(self, jobs):
        self.now += self.fixed + self.per_job * len(jobs)
        self.batches.append([job.request.text for job in jobs])
        for job in jobs:
            job.taken += 1
        return [[np.zeros(8, dtype=np.float32)] if job.done else [] for job in jobs]


def serve_four(model: Costed, adaptive: bool) -> list[float]:
    """Four requests at once through a one-stage pipeline (its worker thread); each one's time to first audio on the
    model's clock, in order of submission."""
    stage = IterativeStage("gen", model, max_num_seqs=8, adaptive_batching=adaptive, clock=lambda: model.now)
    pipeline = Pipeline([stage])
    outputs = [Timed(model) for _ in range(4)]
    requests = [SynthesisRequest(text=str(i), stage_input=None, output=output) for i, output in enumerate(outputs)]
    start = model.now
    pipeline.workers[0].put(StageItem(request) for request in requests)  # one message: all four arrive at once
    for output in outputs:
        assert output.closed.wait(30)
    pipeline.close()
    return [output.audio_at - start for output in outputs]


def test_a_compute_bound_step_serves_the_queue_one_after_another():
    alone = STEPS * 1.0  # one second per job and step: a lone request's audio after 6 s
    before = serve_four(Costed(0.0, 1.0), adaptive=False)
    assert before == [4 * alone] * 4  # all four share every step and get their audio together
    model = Costed(0.0, 1.0)
    after = serve_four(model, adaptive=True)
    # request 1 as alone plus the two steps at two that measured the cost; then one after another, first come first
    # served; the last no later than batched (the same throughput)
    assert after == [alone + 2, 2 * alone, 3 * alone, 4 * alone]
    assert [len(b) for b in model.batches] == [1, 1, 2, 2] + [1] * (4 * STEPS - 6)


def test_a_step_where_batching_adds_a_tenth_to_throughput_still_serves_one_after_another():
    """One more request costs 0.8 of a lone step (OmniVoice's generator on two cores): batching would raise throughput
    by ~11 % at two, but every request but the last would get its audio later than one after another."""
    alone = STEPS * 1.0
    batched = serve_four(Costed(0.2, 0.8), adaptive=False)
    assert batched == pytest.approx([STEPS * 3.4] * 4)
    model = Costed(0.2, 0.8)
    ttfa = serve_four(model, adaptive=True)
    measuring = 2 * 1.8  # the two steps at two that measured the cost, request 2 advancing in them
    assert ttfa == pytest.approx([alone + measuring - 2, 2 * alone + measuring - 4, 3 * alone + measuring - 4,
                                  4 * alone + measuring - 4])
    assert [len(b) for b in model.batches] == [1, 1, 2, 2] + [1] * (4 * STEPS - 6)
    sequential = [k * alone for k in (1, 2, 3, 4)]
    assert all(t <= s for t, s in zip(ttfa[1:], sequential[1:], strict=True)) and sum(ttfa) / 4 < sum(batched) / 4


def test_a_step_whose_cost_does_not_grow_with_the_batch_batches_everyone():
    model = Costed(1.0, 0.0)
    ttfa = serve_four(model, adaptive=True)
    assert [len(b) for b in model.batches][:6] == [1, 1, 2, 2, 4, 4]  # measured, then every ready request
    assert ttfa == [6.0, 8.0, 10.0, 10.0]  # against 6, 12, 18, 24 one after another


def fake_clock_stage(model: Costed) -> IterativeStage:
    """The stage alone, stepped by the test."""
    return IterativeStage("gen", model, clock=lambda: model.now)


def drain(stage: IterativeStage) -> list[StageItem]:
    items = []
    while stage.has_work():
        items += stage.step()
    return items


def test_held_requests_are_served_in_arrival_order_and_none_starves():
    model = Costed(0.0, 1.0)
    stage = fake_clock_stage(model)
    requests = [SynthesisRequest(text=str(i), stage_input=None, output=Timed(model)) for i in range(5)]
    for request in requests:
        stage.add(StageItem(request))
    finished = [item.request.text for item in drain(stage) if item.finished]
    assert finished == ["0", "1", "2", "3", "4"]
    assert sum(len(batch) for batch in model.batches) == 5 * STEPS


def test_cancelling_the_request_in_service_lets_the_next_one_run():
    model = Costed(0.0, 1.0)
    stage = fake_clock_stage(model)
    first, second, third = (SynthesisRequest(text=str(i), stage_input=None, output=Timed(model)) for i in range(3))
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
