"""A stage starts no new request while a later stage steps work that fills the device (its measured step costs say
one more request costs about what it costs alone): on such a device the new request's work would only come out of
the time of the requests ahead of it. A later stage whose step does not fill the device is not waited for."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

FLOW_STEPS = 3


class Output:
    def __init__(self) -> None:
        self.closed = threading.Event()

    def put_audio(self, samples) -> None:
        pass

    def close(self, error=None) -> None:
        self.closed.set()


@dataclass(eq=False)
class Job:
    request: SynthesisRequest
    steps: int
    taken: int = 0

    @property
    def done(self) -> bool:
        return self.taken >= self.steps


@dataclass
class Costed(IterativeModel):
    """Each step costs `fixed + per_job · batch` on its own fake clock (what its stage times it by) and is written to
    the shared `log` as (name, request texts); hooks run with the step's jobs before and after."""

    name: str
    steps: int
    fixed: float
    per_job: float
    log: list[tuple[str, list[str]]]
    now: float = 0.0
    before_step: list = field(default_factory=list)
    after_step: list = field(default_factory=list)

    def start(self, request, payload):
        return Job(request, self.steps)

    def step(self, jobs):
        for hook in self.before_step:
            hook(jobs)
        self.now += self.fixed + self.per_job * len(jobs)
        self.log.append((self.name, [job.request.text for job in jobs]))
        for job in jobs:
            job.taken += 1
        for hook in self.after_step:
            hook(jobs)
        out = np.zeros(8, dtype=np.float32)
        return [[out] if job.done else [] for job in jobs]


def two_stages(flow_fixed: float, flow_per_job: float) -> tuple[Pipeline, Costed, Costed, list]:
    """A one-step conditioning stage (compute-bound) before a three-step flow with the given costs."""
    log: list[tuple[str, list[str]]] = []
    condition = Costed("condition", 1, 0.0, 1.0, log)
    flow = Costed("flow", FLOW_STEPS, flow_fixed, flow_per_job, log)
    pipeline = Pipeline([IterativeStage("condition", condition, clock=lambda: condition.now),
                         IterativeStage("flow", flow, clock=lambda: flow.now)])
    return pipeline, condition, flow, log


def serve(pipeline: Pipeline, texts: list[str]) -> None:
    outputs = [Output() for _ in texts]
    requests = [SynthesisRequest(text=text, stage_input=None, output=output) for text, output in zip(texts, outputs)]
    pipeline.workers[0].put(StageItem(request) for request in requests)  # one message: all arrive at once
    for output in outputs:
        assert output.closed.wait(30)


def measure(pipeline: Pipeline, flow: Costed) -> None:
    """Serve six requests at once, so that both stages time two steps of one and two of two (their costs are known:
    the one-step condition takes them 1, 1, 2, 2; the flow, held back until all are conditioned, likewise)."""
    gate = threading.Event()
    flow.before_step.append(lambda jobs: gate.wait(5))
    threading.Timer(0.3, gate.set).start()
    serve(pipeline, [f"warm-{i}" for i in range(6)])
    flow.before_step.clear()
    for stage in pipeline.stages:
        assert stage.step_cost.measured().keys() == {1, 2}


def test_no_request_is_started_while_a_later_stage_fills_the_device():
    pipeline, condition, flow, log = two_stages(0.0, 1.0)
    try:
        measure(pipeline, flow)
        assert pipeline.stages[1].fills_device()
        log.clear()
        serve(pipeline, ["1", "2", "3"])
    finally:
        pipeline.close()
    # one after another: each request is conditioned only once the flow is done with the one before
    expected = []
    for text in ("1", "2", "3"):
        expected += [("condition", [text])] + [("flow", [text])] * FLOW_STEPS
    assert log == expected


def test_a_later_stage_whose_step_does_not_fill_the_device_is_not_waited_for():
    pipeline, condition, flow, log = two_stages(1.0, 0.0)  # one more request costs nothing: batching pays
    try:
        measure(pipeline, flow)
        assert not pipeline.stages[1].fills_device()
        log.clear()
        conditioned = threading.Event()
        # the flow's first step waits until every request is conditioned: it must not be waited for meanwhile
        flow.before_step.append(lambda jobs: conditioned.wait(5))
        condition.after_step.append(lambda jobs: jobs[-1].request.text == "3" and conditioned.set())
        serve(pipeline, ["1", "2", "3"])
    finally:
        pipeline.close()
    assert conditioned.is_set()
    first_flow = next(i for i, (name, _) in enumerate(log) if name == "flow")
    assert [texts for name, texts in log[:first_flow]] == [["1"], ["2"], ["3"]]
