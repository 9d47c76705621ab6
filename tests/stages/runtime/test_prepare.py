"""PrepareStage: clips are encoded on the stage's encoder thread; requests with nothing to encode pass straight on."""

from __future__ import annotations

import threading
import time

from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.prepare import PrepareStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


class Encoder:
    """stage_input "clip": a costly encoding that waits for `release`; "bad clip": one that raises; else nothing."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[str] = []

    def costly(self, request: SynthesisRequest) -> bool:
        return request.stage_input in ("clip", "bad clip")

    def prepare(self, request: SynthesisRequest) -> str | None:
        if not self.costly(request):
            return None
        self.threads.append(threading.current_thread().name)
        if request.stage_input == "bad clip":
            raise ValueError("the clip does not decode")
        assert self.release.wait(10)
        return f"encoded {request.request_id}"


def request(name: str, stage_input: str | None) -> SynthesisRequest:
    return SynthesisRequest(text=name, stage_input=stage_input, output=AudioOutput(), request_id=name)


def passed_on(stage: PrepareStage, steps: int = 20) -> list[str]:
    names: list[str] = []
    for _ in range(steps):
        names += [item.request.request_id for item in stage.step()]
    return names


async def test_requests_without_a_clip_pass_while_a_clip_is_encoded():
    encoder = Encoder()
    stage = PrepareStage("voices", encoder)
    clone, plain, later = request("clone", "clip"), request("plain", None), request("later", None)
    stage.add(StageItem(clone))
    stage.add(StageItem(plain))
    assert passed_on(stage) == ["plain"]  # the clip is still being encoded
    stage.add(StageItem(later))  # arrives during the encoding, as a session's next sentence does
    assert passed_on(stage) == ["later"]
    encoder.release.set()
    deadline = time.monotonic() + 10
    names: list[str] = []
    while not names and time.monotonic() < deadline:
        names = passed_on(stage, 1)
    assert names == ["clone"] and clone.prepared == "encoded clone" and plain.prepared is None
    assert encoder.threads == ["stage-voices-encoder_0"] and not stage.has_work()


async def test_a_failed_encoding_fails_its_request_alone():
    encoder = Encoder()
    encoder.release.set()
    stage = PrepareStage("voices", encoder)
    bad, good = request("bad", "bad clip"), request("good", "clip")
    stage.add(StageItem(bad))
    stage.add(StageItem(good))
    names: list[str] = []
    deadline = time.monotonic() + 10
    while "good" not in names and time.monotonic() < deadline:
        try:
            names += [item.request.request_id for item in stage.step()]
        except ValueError as error:
            assert stage.batch_requests() == [bad] and "does not decode" in str(error)
            stage.drop(bad)
    assert names == ["good"] and not stage.has_work()


async def test_a_closed_request_waiting_for_its_encoding_is_dropped():
    encoder = Encoder()
    stage = PrepareStage("voices", encoder)
    first, second = request("first", "clip"), request("second", "clip")
    stage.add(StageItem(first))
    stage.add(StageItem(second))
    assert passed_on(stage, 2) == []
    second.fail(ValueError("the caller went away"))
    encoder.release.set()
    deadline = time.monotonic() + 10
    names: list[str] = []
    while stage.has_work() and time.monotonic() < deadline:
        names += passed_on(stage, 1)
    assert names == ["first"]
    assert encoder.threads == ["stage-voices-encoder_0"]  # the closed request's clip was never encoded
