"""IterativeStage bookkeeping with a stand-in model: batched steps, joining, bounds, finishing, dropping."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage
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
class CountingModel(IterativeModel):
    """Each request takes as many steps as its text has words, and outputs at the steps listed in its stage input."""

    batches: list[list[str]] = field(default_factory=list)

    def start(self, request, payload):
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
    stage = IterativeStage("it", model, max_num_seqs=2, adaptive_batching=False)  # batches as they come, whatever they cost
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
    stage = IterativeStage("it", model, adaptive_batching=False)
    a, b = request("a a a a"), request("b b b b")
    stage.add(StageItem(a))
    stage.add(StageItem(b))
    stage.step()
    a.cancel()
    items = drain(stage)
    assert all(i.request is b for i in items) and model.batches[1:] == [["b b b b"]] * 3


def test_bad_input_fails_at_add_and_a_job_takes_one_input_by_default():
    stage = IterativeStage("it", CountingModel())
    with pytest.raises(ValueError):
        stage.add(StageItem(request("bad")))
    assert not stage.has_work()
    r = request("x y")
    stage.add(StageItem(r, payload="frames"))  # a later stage's first item: the output of the stage before
    assert stage.has_work()
    with pytest.raises(ValueError, match="one input per request"):
        stage.add(StageItem(r, payload="more frames"))


@dataclass
class SumJob:
    request: SynthesisRequest
    pending: list[int]
    total: int = 0
    done: bool = False


class Summing(IterativeModel):
    """A job fed a stream of numbers: each step adds the next one to its total; a negative number ends it."""

    def start(self, request, payload):
        return SumJob(request, [payload])

    def feed(self, job, payload):
        job.pending.append(payload)

    def ready(self, job):
        return bool(job.pending)

    def step(self, jobs):
        out = []
        for job in jobs:
            number = job.pending.pop(0)
            if number < 0:
                job.done = True
                out.append([job.total])
            else:
                job.total += number
                out.append([])
        return out


def test_a_job_fed_a_stream_steps_only_when_fed():
    stage = IterativeStage("sum", Summing(), max_num_seqs=1)
    a, b = request("a"), request("b")
    stage.add(StageItem(a, 1))
    stage.add(StageItem(b, 10))
    assert stage.step() == [] and stage.batch_requests() == [a]  # one seat: a first
    assert stage.step() == [] and stage.batch_requests() == [b]  # a waits to be fed, so b takes the seat
    assert not stage.has_work()  # nobody fed: the worker sleeps until more comes
    stage.add(StageItem(a, 2))
    stage.add(StageItem(a, -1, finished=True))
    stage.add(StageItem(b, -1, finished=True))
    items = drain(stage)
    assert [(i.request.text, i.payload, i.finished) for i in items] == [("a", 3, True), ("b", 10, True)]
    assert stage.active_requests() == []
