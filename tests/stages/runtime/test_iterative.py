"""IterativeStage bookkeeping with a stand-in model: batched steps, joining, bounds, finishing, dropping."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from vocalis.stages.runtime.iterative import IterativeStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@dataclass
class Job:
    request: SynthesisRequest
    steps: int
    taken: int = 0
    outputs_at: tuple[int, ...] = ()

    @property
    def done(self) -> bool:
        return self.taken >= self.steps


@dataclass
class CountingModel:
    """Each request takes as many steps as its text has words, and outputs at the steps listed in its stage input."""

    batches: list[list[str]] = field(default_factory=list)

    def start(self, request):
        if request.text == "bad":
            raise ValueError("bad input")
        return Job(request, len(request.text.split()), outputs_at=request.stage_input or ())

    def step(self, jobs):
        self.batches.append([job.request.text for job in jobs])
        out = []
        for job in jobs:
            job.taken += 1
            out.append([f"{job.request.text}@{job.taken}"] if job.taken in job.outputs_at or job.done else [])
        return out


def request(text, outputs_at=()):
    return SynthesisRequest(text=text, stage_input=outputs_at, output=NullOutput())


def drain(stage, joins=None):
    joins = dict(joins or {})
    items, step = [], 0
    while stage.has_work() or joins:
        for r in joins.pop(step, []):
            stage.add(StageItem(r))
        items += stage.step()
        step += 1
    return items


def test_running_requests_step_together_and_join_between_steps():
    model = CountingModel()
    stage = IterativeStage("it", model, max_num_seqs=2)
    a, b, c = request("a a a"), request("b b"), request("c c c c", outputs_at=(1,))
    stage.add(StageItem(a))
    items = drain(stage, {1: [b, c]})
    assert model.batches == [["a a a"], ["a a a", "b b"], ["a a a", "b b"], ["c c c c"], ["c c c c"], ["c c c c"], ["c c c c"]]
    finished = [(i.request.text, i.payload) for i in items if i.finished]
    assert finished == [("a a a", "a a a@3"), ("b b", "b b@2"), ("c c c c", "c c c c@4")]
    assert [i.payload for i in items if i.request is c] == ["c c c c@1", "c c c c@4"]
    assert not stage.has_work() and stage.active_requests() == []


def test_cancelled_requests_leave_before_the_next_step():
    model = CountingModel()
    stage = IterativeStage("it", model)
    a, b = request("a a a a"), request("b b b b")
    stage.add(StageItem(a))
    stage.add(StageItem(b))
    stage.step()
    a.cancel()
    items = drain(stage)
    assert all(i.request is b for i in items) and model.batches[1:] == [["b b b b"]] * 3


def test_bad_input_fails_at_add_and_new_requests_only():
    stage = IterativeStage("it", CountingModel())
    with pytest.raises(ValueError):
        stage.add(StageItem(request("bad")))
    with pytest.raises(ValueError):
        stage.add(StageItem(request("x"), payload="frames"))
    assert not stage.has_work()
