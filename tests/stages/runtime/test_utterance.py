"""UtteranceStage: one piece per step for a lone request (solo), up to `lanes` requests at once when several wait."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import numpy as np

from vocalis.stages.api.errors import SynthesisFailed
from vocalis.stages.runtime import utterance
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem
from vocalis.stages.runtime.utterance import LastPiece, UtteranceStage, solo
from vocalis.stages.runtime.worker import StageWorker

PIECE_S = 0.15


class Recorder:
    """A model whose pieces take PIECE_S each, recording when, where and whether solo each ran; with stage input
    "last" it yields its last piece as a LastPiece."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, float, float, bool]] = []
        self._lock = threading.Lock()

    def synthesize(self, request: SynthesisRequest, payload: None) -> Iterator[np.ndarray | LastPiece]:
        count = int(request.text)
        for index in range(count):
            start = time.monotonic()
            alone = solo()
            time.sleep(PIECE_S)
            if request.stage_input == "fail" and index == 1:
                raise SynthesisFailed("this request's second piece fails")
            with self._lock:
                self.runs.append((request.request_id, start, time.monotonic(), alone))
            piece = np.full(10, index, dtype=np.float32)
            yield LastPiece(piece) if request.stage_input == "last" and index == count - 1 else piece


def drive(stage: UtteranceStage, requests: list[SynthesisRequest]) -> dict[str, list]:
    """Step the stage until it is idle; every request's outputs in order: each piece's index, "done" for an item that
    only finishes it, "N done" for piece N that also finishes it."""
    for request in requests:
        stage.add(StageItem(request))
    produced: dict[str, list] = {r.request_id: [] for r in requests}
    while stage.has_work():
        for item in stage.step():
            if item.payload is None:
                produced[item.request.request_id].append("done" if item.finished else None)
            else:
                index = int(item.payload[0])
                produced[item.request.request_id].append(f"{index} done" if item.finished else index)
    return produced


def run(lanes: int, specs: list[tuple[str, object]]) -> tuple[dict[str, list], list[SynthesisRequest], float]:
    async def go():
        requests = [SynthesisRequest(text=t, stage_input=s, output=AudioOutput(), request_id=f"r{i}") for i, (t, s) in enumerate(specs)]
        start = time.monotonic()
        produced = drive(stage, requests)
        return produced, requests, time.monotonic() - start

    stage = UtteranceStage("u", model, lanes=lanes)
    return asyncio.run(go())


model = Recorder()


def test_a_lone_request_runs_solo_even_with_lanes():
    model.runs.clear()
    produced, _, _ = run(2, [("3", None)])
    assert produced == {"r0": [0, 1, 2, "done"]}
    assert [alone for *_, alone in model.runs] == [True, True, True]


def test_several_requests_advance_at_once_on_lanes():
    model.runs.clear()
    produced, _, wall = run(2, [("4", None), ("4", None)])
    assert produced == {"r0": [0, 1, 2, 3, "done"], "r1": [0, 1, 2, 3, "done"]}
    assert not any(alone for *_, alone in model.runs)
    overlapping = [
        (a, b) for a in model.runs for b in model.runs if a[0] < b[0] and a[1] < b[2] and b[1] < a[2]
    ]
    assert len(overlapping) >= 3  # the two requests' pieces ran side by side
    assert wall < 8 * PIECE_S * 0.8  # well under the serial time


def test_one_lane_is_serial_and_solo():
    model.runs.clear()
    produced, _, _ = run(1, [("2", None), ("2", None)])
    assert produced == {"r0": [0, 1, "done"], "r1": [0, 1, "done"]}
    runs = sorted(model.runs, key=lambda r: r[1])
    assert all(a[2] <= b[1] for a, b in zip(runs, runs[1:], strict=False)) and all(r[3] for r in runs)


def test_a_failing_request_fails_alone_on_either_path():
    for lanes in (1, 2):
        produced, requests, _ = run(lanes, [("3", "fail"), ("3", None)])
        assert produced["r0"] == [0] and isinstance(requests[0].error, SynthesisFailed)
        assert "second piece fails" in str(requests[0].error)
        assert produced["r1"] == [0, 1, 2, "done"] and requests[1].error is None


def test_a_last_piece_ends_its_request_with_its_audio_on_either_path():
    for lanes in (1, 2):
        produced, requests, _ = run(lanes, [("2", "last"), ("1", "last"), ("2", None)])
        assert produced == {"r0": [0, "1 done"], "r1": ["0 done"], "r2": [0, 1, "done"]}
        assert all(r.error is None for r in requests)


def test_a_last_piece_does_not_wait_behind_fresh_requests():
    """Four one-piece requests on two lanes: each ends the moment its piece is back. Without LastPiece, the end of the
    first two (a step of their own) waits until the two fresh requests' pieces have freed a lane."""
    async def go(stage_input: object) -> tuple[dict[str, float], dict[str, float]]:
        model.runs.clear()
        stage = UtteranceStage("u", model, lanes=2)
        requests = [SynthesisRequest(text="1", stage_input=stage_input, output=AudioOutput(), request_id=f"r{i}") for i in range(4)]
        for request in requests:
            stage.add(StageItem(request))
        ended: dict[str, float] = {}
        while stage.has_work():
            for item in stage.step():
                if item.finished:
                    ended[item.request.request_id] = time.monotonic()
        return ended, {rid: end for rid, _, end, _ in model.runs}

    ended, piece_done = asyncio.run(go("last"))
    assert max(ended["r0"], ended["r1"]) < min(piece_done["r2"], piece_done["r3"])
    ended, piece_done = asyncio.run(go(None))
    assert min(ended["r0"], ended["r1"]) >= min(piece_done["r2"], piece_done["r3"])


def test_a_request_cancelled_mid_piece_is_dropped_when_its_piece_is_back():
    async def go():
        stage = UtteranceStage("u", model, lanes=2)
        a = SynthesisRequest(text="5", stage_input=None, output=AudioOutput(), request_id="a")
        b = SynthesisRequest(text="3", stage_input=None, output=AudioOutput(), request_id="b")
        stage.add(StageItem(a))
        stage.add(StageItem(b))
        stage.step()  # both pieces start; a returns or is still running
        a.cancel()
        produced = []
        while stage.has_work():
            produced += [(i.request.request_id, i.finished) for i in stage.step()]
        return produced

    produced = asyncio.run(go())
    assert ("b", True) in produced and not any(rid == "a" for rid, _ in produced)


class Timed:
    """A model of one piece per request that takes `float(request.text)` seconds, recording when each started."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}

    def synthesize(self, request: SynthesisRequest, payload: None) -> Iterator[np.ndarray | LastPiece]:
        self.started[request.request_id] = time.monotonic()
        time.sleep(float(request.text))
        yield LastPiece(np.zeros(10, dtype=np.float32))


def test_a_new_request_takes_a_free_lane_at_once(monkeypatch):
    """A long piece runs on one lane, the other is free: a request put in the inbox starts at once, not when the
    step next looks up on its own (the poll is made far longer here than the long piece)."""
    monkeypatch.setattr(utterance, "_POLL_S", 30.0)

    async def go() -> tuple[float, dict[str, float]]:
        model = Timed()
        worker = StageWorker(UtteranceStage("u", model, lanes=2))
        worker.start()
        try:
            def request(seconds: float, name: str) -> SynthesisRequest:
                return SynthesisRequest(text=str(seconds), stage_input=None, output=AudioOutput(), request_id=name)

            worker.put([StageItem(request(1.5, "long")), StageItem(request(0.05, "short"))])  # side by side, not solo
            time.sleep(0.4)  # the short one is done: one lane free, the long piece still running
            put_at = time.monotonic()
            worker.put([StageItem(request(0.05, "new"))])
            deadline = time.monotonic() + 5
            while "new" not in model.started and time.monotonic() < deadline:
                time.sleep(0.01)
            return put_at, model.started
        finally:
            worker.stop()

    put_at, started = asyncio.run(go())
    assert started["new"] - put_at < 0.5  # the long piece ends 1.1 s after the put


def order_of_service(sample_rate: int, pause_s: float) -> list[str]:
    """r0 (three pieces of 10 samples) gets its first piece; `pause_s` later r1 (one piece) arrives: the order in which
    the two are served after that, one lane."""
    async def go() -> list[str]:
        stage = UtteranceStage("u", model, sample_rate=sample_rate)
        r0, r1 = (SynthesisRequest(text=t, stage_input=None, output=AudioOutput(), request_id=f"r{i}") for i, t in enumerate("31"))
        stage.add(StageItem(r0))
        assert [item.request for item in stage.step()] == [r0]
        time.sleep(pause_s)
        stage.add(StageItem(r1))
        served = []
        while stage.has_work():
            served += [item.request.request_id for item in stage.step() if item.payload is not None]
        return served

    return asyncio.run(go())


def test_a_fresh_request_goes_ahead_of_one_whose_audio_still_plays():
    # a piece of 10 samples at 1 Hz: r0's listener has 10 s of audio to hear before its next piece is due
    assert order_of_service(sample_rate=1, pause_s=0.05) == ["r1", "r0", "r0"]


def test_a_started_request_behind_its_audio_goes_ahead_of_requests_that_arrive_later():
    # 10 samples at 1 kHz, each piece 150 ms: r0's pieces fall due 10 and 20 ms after its first came back, before r1
    # arrived, so fresh requests do not starve it, however many come
    assert order_of_service(sample_rate=1000, pause_s=0.05) == ["r0", "r0", "r1"]


def wait_finished(requests: list[SynthesisRequest], timeout_s: float = 5.0) -> None:
    """Until every request has finished (or `timeout_s` has passed: the test's asserts then say what is missing)."""
    deadline = time.monotonic() + timeout_s
    while not all(r.finished_at for r in requests) and time.monotonic() < deadline:
        time.sleep(0.01)


class ByLength:
    """One LastPiece per request, taking 20 ms per character of its text; records when each started and whether solo."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[float, bool]] = {}

    def synthesize(self, request: SynthesisRequest, payload: None) -> Iterator[np.ndarray | LastPiece]:
        self.started[request.text] = (time.monotonic(), solo())
        time.sleep(0.02 * len(request.text))
        yield LastPiece(np.zeros(10, dtype=np.float32))


def test_a_sessions_later_units_take_the_free_lanes_longest_first_once_it_is_alone():
    """Two sessions share the lanes; the first's three later units come meanwhile. When the other session is done and
    the first is alone with its head still running beside nothing, its later units go to the free lane longest first,
    so the longest does not start last and end alone on one lane (arrival order: 10, 5, 20 characters)."""
    async def go() -> dict[str, tuple[float, bool]]:
        model = ByLength()
        worker = StageWorker(UtteranceStage("u", model, lanes=2))
        worker.start()
        requests = [SynthesisRequest(text=t, stage_input=None, output=AudioOutput(), request_id="session")
                    for t in ("h" * 30, "a" * 10, "b" * 5, "c" * 20)]
        other = SynthesisRequest(text="o" * 5, stage_input=None, output=AudioOutput(), request_id="other")
        try:
            worker.put([StageItem(requests[0]), StageItem(other)])  # two sessions: side by side
            time.sleep(0.03)  # the later units come while both run
            for request in requests[1:]:
                worker.put([StageItem(request)])
            wait_finished([*requests, other])
            return model.started
        finally:
            worker.stop()

    started = asyncio.run(go())
    head, later_10, later_5, later_20 = (started[t] for t in ("h" * 30, "a" * 10, "b" * 5, "c" * 20))
    assert not any(alone for _, alone in (head, later_10, later_5, later_20))  # each began beside a running piece
    assert later_20[0] < later_10[0] < later_5[0]


def test_beside_another_session_later_units_keep_their_arrival_order():
    """With two sessions in the stage, a session's later units are served as they arrived: its long text does not go
    ahead of the other session's units, which keep the lanes busy anyway."""
    async def go() -> dict[str, tuple[float, bool]]:
        model = ByLength()
        worker = StageWorker(UtteranceStage("u", model, lanes=2))
        worker.start()

        def unit(text: str, session: str) -> SynthesisRequest:
            return SynthesisRequest(text=text, stage_input=None, output=AudioOutput(), request_id=session)

        requests = [unit("h" * 5, "a"), unit("x" * 15, "b"), unit("s" * 5, "a"), unit("l" * 20, "a")]
        try:
            worker.put([StageItem(requests[0]), StageItem(requests[1])])
            time.sleep(0.03)
            for request in requests[2:]:
                worker.put([StageItem(request)])
            wait_finished(requests)
            return model.started
        finally:
            worker.stop()

    started = asyncio.run(go())
    assert started["l" * 20][0] > started["s" * 5][0] + 0.05  # the short one took the lane the head freed


def test_another_session_starts_beside_a_solo_piece_at_once_and_the_solo_session_waits():
    """A lone request's piece runs solo (1 s here); a request of another session put meanwhile starts on the free
    lane at once, not when the solo piece ends; a later unit of the solo request's own session waits for it."""
    async def go() -> tuple[float, dict[str, tuple[float, bool]]]:
        model = ByLength()
        worker = StageWorker(UtteranceStage("u", model, lanes=2))
        worker.start()
        head = SynthesisRequest(text="h" * 50, stage_input=None, output=AudioOutput(), request_id="a")
        follower = SynthesisRequest(text="f" * 2, stage_input=None, output=AudioOutput(), request_id="a")
        other = SynthesisRequest(text="o" * 2, stage_input=None, output=AudioOutput(), request_id="b")
        try:
            worker.put([StageItem(head)])
            time.sleep(0.2)  # the head runs solo
            put_at = time.monotonic()
            worker.put([StageItem(follower), StageItem(other)])
            wait_finished([head, follower, other])
            return put_at, model.started
        finally:
            worker.stop()

    put_at, started = asyncio.run(go())
    assert started["h" * 50][1]  # alone when it started
    assert started["o" * 2][0] - put_at < 0.3 and not started["o" * 2][1]  # the head has ~0.8 s left
    assert started["f" * 2][0] >= started["h" * 50][0] + 0.95  # after its session's head


def test_a_lone_sessions_units_run_solo_one_after_another():
    """A lone session's units (a whole text, put together): each runs solo, with every core, in the order its listener
    hears them, the next when the one before is done; a two-thread Piper run ends two unequal units sooner this way
    than one thread each side by side."""
    async def go() -> dict[str, tuple[float, bool]]:
        model = ByLength()
        worker = StageWorker(UtteranceStage("u", model, lanes=2))
        worker.start()
        units = [SynthesisRequest(text=t, stage_input=None, output=AudioOutput(), request_id="text")
                 for t in ("a" * 5, "b" * 10, "c" * 3)]
        try:
            worker.put([StageItem(unit) for unit in units])
            wait_finished(units)
            return model.started
        finally:
            worker.stop()

    started = asyncio.run(go())
    (a, a_solo), (b, b_solo), (c, c_solo) = (started[t] for t in ("a" * 5, "b" * 10, "c" * 3))
    assert a_solo and b_solo and c_solo
    assert b >= a + 0.1 and c >= b + 0.2  # each after the one before: 20 ms a character


def test_a_lane_is_free_again_once_a_cancelled_requests_piece_is_back():
    """A lone request is cancelled in the middle of its (solo) piece and nothing else is held: the stage still takes
    the piece back when it ends, so a request that comes later finds both lanes free and runs solo at once."""
    async def go() -> tuple[float, dict[str, tuple[float, bool]]]:
        model = ByLength()
        worker = StageWorker(UtteranceStage("u", model, lanes=2))
        worker.start()
        first = SynthesisRequest(text="a" * 15, stage_input=None, output=AudioOutput(), request_id="first")
        later = SynthesisRequest(text="b" * 5, stage_input=None, output=AudioOutput(), request_id="later")
        try:
            first.on_cancel(worker.wake)  # as the pipeline wakes its workers
            worker.put([StageItem(first)])
            time.sleep(0.1)
            first.cancel()  # dropped at once; its piece runs on for another 0.2 s
            time.sleep(0.5)
            put_at = time.monotonic()
            worker.put([StageItem(later)])
            wait_finished([later])
            return put_at, model.started
        finally:
            worker.stop()

    put_at, started = asyncio.run(go())
    at, alone = started["b" * 5]
    assert alone and at - put_at < 0.1
