"""A stage holds a new request while a later stage works for the request ahead, where the later stage's steps are
measured to slow down beside another stage's so much that starting it would cost the requests ahead more than it
gains (device_share.py); where steps do not slow each other, the stages keep working side by side.

The two stages run on a simulated device in real time: a step needs `WORK` seconds of it, and steps that run at once
share it equally (each progresses at 1/k of its speed with k stepping), or, for a device with room to spare, do not
slow each other at all. The rule's threshold is checked against an exact model of the same device: side by side only
where the queue's mean time to first audio is no worse than one after another."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from vocalis.stages.runtime.device_share import OverlapCost, SteppingClock, should_wait
from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

WORK = 0.04
FLOW_STEPS = 3


class Device:
    """Runs steps of `WORK` seconds each; `shared`: steps at once split its speed, else each runs at full speed."""

    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self._lock = threading.Lock()
        self._active = 0

    def run(self, work: float) -> None:
        with self._lock:
            self._active += 1
        try:
            done, last = 0.0, time.perf_counter()
            while done < work:
                time.sleep(0.002)
                now = time.perf_counter()
                with self._lock:
                    sharing = self._active if self.shared else 1
                done += (now - last) / sharing
                last = now
        finally:
            with self._lock:
                self._active -= 1


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
class OnDevice(IterativeModel):
    """Each step runs `WORK` on the device per job, then is written to the shared `log` as (name, request texts)."""

    name: str
    steps: int
    device: Device
    log: list[tuple[str, list[str]]]
    after_step: list = field(default_factory=list)

    def start(self, request, payload):
        return Job(request, self.steps)

    def step(self, jobs):
        self.device.run(WORK * len(jobs))
        self.log.append((self.name, [job.request.text for job in jobs]))
        for job in jobs:
            job.taken += 1
        for hook in self.after_step:
            hook(jobs)
        return [[np.zeros(8, dtype=np.float32)] if job.done else [] for job in jobs]


def two_stages(shared: bool) -> tuple[Pipeline, OnDevice, list]:
    """A one-step conditioning stage before a three-step flow, one request a step each (batching is not what is
    tested here)."""
    device, log = Device(shared), []
    condition = OnDevice("condition", 1, device, log)
    flow = OnDevice("flow", FLOW_STEPS, device, log)
    pipeline = Pipeline([IterativeStage("condition", condition, max_num_seqs=1, adaptive_batching=False),
                         IterativeStage("flow", flow, max_num_seqs=1, adaptive_batching=False)])
    return pipeline, condition, log


def serve(pipeline: Pipeline, texts: list[str]) -> None:
    outputs = [Output() for _ in texts]
    requests = [SynthesisRequest(text=text, stage_input=None, output=output) for text, output in zip(texts, outputs, strict=True)]
    pipeline.workers[0].put(StageItem(request) for request in requests)  # one message: all arrive at once
    for output in outputs:
        assert output.closed.wait(30)


def measure(pipeline: Pipeline) -> float:
    """One request alone (the flow's steps alone), then four at once (the conditions of the later ones beside the
    flow of the first, as nothing is measured yet): the flow's overlap slowdown."""
    serve(pipeline, ["warm"])
    serve(pipeline, [f"warm-{i}" for i in range(4)])
    slowdown = pipeline.stages[1].overlap_slowdown()
    assert slowdown is not None
    return slowdown


def test_a_new_request_waits_while_a_later_stage_that_slows_beside_others_works():
    pipeline, condition, log = two_stages(shared=True)
    try:
        assert measure(pipeline) > 1.6  # each step at half speed beside another: s ~ 2
        log.clear()
        serve(pipeline, ["1", "2", "3"])
    finally:
        pipeline.close()
    # one after another: each request is conditioned only once the flow is done with the one before
    expected = []
    for text in ("1", "2", "3"):
        expected += [("condition", [text])] + [("flow", [text])] * FLOW_STEPS
    assert log == expected


def test_a_later_stage_whose_steps_do_not_slow_beside_others_is_not_waited_for():
    pipeline, condition, log = two_stages(shared=False)
    try:
        assert measure(pipeline) < 1.33  # a device with room: s ~ 1
        log.clear()
        conditioned = threading.Event()
        condition.after_step.append(lambda jobs: jobs[-1].request.text == "3" and conditioned.set())
        serve(pipeline, ["1", "2", "3"])
    finally:
        pipeline.close()
    assert conditioned.is_set()
    conditions = [i for i, (name, _) in enumerate(log) if name == "condition"]
    last_flow_of_1 = max(i for i, entry in enumerate(log) if entry == ("flow", ["1"]))
    assert conditions[-1] < last_flow_of_1  # all three conditioned while the flow worked on request 1


def test_the_stepping_clock_counts_the_time_others_stepped_beside_a_step():
    now = [0.0]
    clock = SteppingClock(lambda: now[0])
    clock.begin()  # this stage steps from 0 to 10
    mark = clock.mark()
    now[0] = 4.0
    clock.begin()  # another from 4 to 9
    now[0] = 9.0
    clock.end()
    now[0] = 10.0
    assert clock.beside_since(mark) == pytest.approx(0.5)
    clock.end()


@pytest.mark.parametrize(("share", "slowdown"), [(1.0, 2.0), (0.5, 2.0), (1.0, 1.0), (0.5, 3.0)])
def test_the_overlap_slowdown_is_read_back_from_steps_partly_beside_others(share, slowdown):
    cost = OverlapCost()
    for _ in range(2):
        cost.record(1.0, 0.0)
        cost.record(1.0 / (1 - share + share / slowdown), share)
    assert cost.slowdown() == pytest.approx(slowdown)


def test_the_threshold_is_the_lower_of_the_two_break_evens():
    assert not should_wait(None, 3)  # not measured: never
    assert should_wait(1.34, 1) and not should_wait(1.3, 1)  # two requests, one overlap a cycle: 2 - 2/3
    assert should_wait(1.5, 3) and not should_wait(1.45, 3)  # four: 2 - 2/5 = 1.6, the stage ahead's 1.5 is lower
    assert should_wait(1.5, 100) and not should_wait(1.49, 100)


def mean_ttfa(upstream: float, downstream: float, slowdown: float, requests: int, hold) -> float:
    """n requests at once through two stages on one device, exactly (piecewise-constant rates): the stage before
    takes `upstream` of the device a request, the later one `downstream`; while both step, each runs at 1/slowdown of
    its speed. `hold(queued)` says whether the stage before holds a new request while the later one has work."""
    waiting, ahead, finished, now = requests, [], [], 0.0
    first = second = None  # the remaining work of the request in each stage
    while len(finished) < requests:
        if first is None and waiting and not ((second is not None or ahead) and hold(waiting)):
            waiting, first = waiting - 1, upstream
        if second is None and ahead:
            second = ahead.pop(0)
        rate = 1 / slowdown if first is not None and second is not None else 1.0
        step = min(work / rate for work in (first, second) if work is not None)
        now += step
        if first is not None:
            first -= step * rate
            if first <= 1e-12:
                first = None
                ahead.append(downstream)
        if second is not None:
            second -= step * rate
            if second <= 1e-12:
                second = None
                finished.append(now)
    return sum(finished) / requests


@pytest.mark.parametrize(("upstream", "downstream"), [(1.0, 10.0), (2.6, 8.0), (3.0, 3.0), (9.0, 0.6)])
@pytest.mark.parametrize("requests", [2, 3, 4, 8])
def test_side_by_side_is_chosen_only_where_it_is_no_worse_than_one_after_another(upstream, downstream, requests):
    """AuK's condition against its flow (2.6 s, 8 s), OmniVoice's generator against its decoder (9 s, 0.6 s) and the
    extremes, for slowdowns from free to fully shared."""
    for slowdown in (1.0, 1.2, 1.4, 1.5, 1.6, 1.8, 2.0):
        sequential = mean_ttfa(upstream, downstream, slowdown, requests, lambda queued: True)
        ruled = mean_ttfa(upstream, downstream, slowdown, requests, lambda queued, s=slowdown: should_wait(s, queued))
        assert ruled <= sequential * (1 + 1e-9), (slowdown, ruled, sequential)
        if slowdown <= 1.2:  # overlap nearly free: the rule runs them side by side and gains
            assert ruled < sequential
