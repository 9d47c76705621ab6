"""A cancelled request leaves every stage at once, even a stage that is idle waiting for more of its input: the
cancel wakes the pipeline's workers, which drop closed requests. Before, a codec stage kept a cancelled stream (and
its decoder state) until some other request's frames arrived."""

from __future__ import annotations

import time

from tests.stages.chunk_feed import NullOutput
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.request_table import RequestTable
from vocalis.stages.runtime.stage import StageItem


class _Entry:
    def __init__(self, request: SynthesisRequest) -> None:
        self.request = request


class PassOn(RequestTable[_Entry]):
    """Stage 0: hands each new request on at once, as a first (unfinished) output."""

    name = "pass_on"

    def __init__(self) -> None:
        super().__init__()
        self._new: list[SynthesisRequest] = []

    def add(self, item: StageItem) -> None:
        self._new.append(item.request)

    def has_work(self) -> bool:
        return bool(self._new)

    def step(self) -> list[StageItem]:
        out = [StageItem(request, payload=b"frames") for request in self._new]
        self._new.clear()
        return out


class WaitsForMore(RequestTable[_Entry]):
    """A later stage that holds each request until its input ends (it never does here): never has work."""

    name = "waits"

    def add(self, item: StageItem) -> None:
        self._put(_Entry(item.request))

    def has_work(self) -> bool:
        return False

    def step(self) -> list[StageItem]:
        return []


def _held(pipeline: Pipeline, stage: str, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and pipeline.running()[stage]:
        time.sleep(0.01)
    return pipeline.running()[stage]


def test_a_cancel_frees_a_stage_that_waits_for_more_input():
    pipeline = Pipeline([PassOn(), WaitsForMore()])
    try:
        request = SynthesisRequest(text="x", stage_input=None, output=NullOutput())
        pipeline.submit(request)
        deadline = time.monotonic() + 5
        while not pipeline.running()["waits"]:
            assert time.monotonic() < deadline, "the request never reached the second stage"
            time.sleep(0.01)
        assert _held(pipeline, "waits", 0.3) == 1  # nothing else arrives: it stays while not cancelled
        request.cancel()
        assert _held(pipeline, "waits", 2.0) == 0
    finally:
        pipeline.close()
