"""Stage kinds compose: each takes a request and the output of the stage before (none at stage 0), so an
IterativeStage, a PrepareStage and an UtteranceStage work at any place in a pipeline."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from vocalis.stages.runtime.iterative import IterativeModel, IterativeStage
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.prepare import PrepareStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem
from vocalis.stages.runtime.utterance import UtteranceStage


class Recording:
    """An output stream that keeps what it is sent."""

    def __init__(self) -> None:
        self.pieces: list[np.ndarray] = []
        self.error: BaseException | None = None
        self.closed = threading.Event()

    def put_audio(self, samples: np.ndarray) -> None:
        self.pieces.append(samples)

    def close(self, error: BaseException | None = None) -> None:
        self.error = error
        self.closed.set()


@dataclass(frozen=True)
class Word:
    text: str
    last: bool


@dataclass(eq=False)
class WordsJob:
    request: SynthesisRequest
    words: list[str]
    said: int = 0

    @property
    def done(self) -> bool:
        return self.said == len(self.words)


@dataclass
class Words(IterativeModel):
    """Stage 0: a request's text, one word per step."""

    payloads: list[object] = field(default_factory=list)

    def start(self, request, payload):
        self.payloads.append(payload)
        return WordsJob(request, request.text.split())

    def step(self, jobs):
        out = []
        for job in jobs:
            job.said += 1
            out.append([Word(job.words[job.said - 1], job.done)])
        return out


@dataclass(eq=False)
class SpellJob:
    request: SynthesisRequest
    voice: object
    """What the PrepareStage before put on the request, as this stage saw it when the request's first word came."""
    pending: list[Word]
    ended: bool = False

    @property
    def done(self) -> bool:
        return self.ended


@dataclass
class Spell(IterativeModel):
    """A later stage fed a stream: each step turns one waiting word of each request into one sample per letter."""

    firsts: list[object] = field(default_factory=list)
    fed: list[str] = field(default_factory=list)

    def start(self, request, payload):
        self.firsts.append(payload)
        return SpellJob(request, request.prepared, [payload])

    def feed(self, job, payload):
        self.fed.append(payload.text)
        job.pending.append(payload)

    def ready(self, job):
        return bool(job.pending)

    def step(self, jobs):
        out = []
        for job in jobs:
            word = job.pending.pop(0)
            job.ended = word.last
            out.append([np.full(len(word.text), float(len(word.text)), dtype=np.float32)])
        return out


class Voices:
    """A preparer whose clips ("clip" stage inputs) are encoded on the stage's encoder thread once `release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def costly(self, request: SynthesisRequest) -> bool:
        return request.stage_input == "clip"

    def prepare(self, request: SynthesisRequest) -> str:
        if self.costly(request):
            assert self.release.wait(10)
        return f"voice of {request.request_id}"


def request(text: str, stage_input: str | None = None) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=stage_input, output=Recording(), request_id=text.split()[0])


def test_stage_0_gets_none_and_later_stages_the_output_of_the_one_before():
    words, voices, spell = Words(), Voices(), Spell()
    stages = [IterativeStage("words", words), PrepareStage("voices", voices), IterativeStage("spell", spell)]
    pipeline = Pipeline(stages)
    cloned, plain = request("cloned voice here", "clip"), request("plain words go first")
    try:
        pipeline.submit(cloned)
        pipeline.submit(plain)
        assert plain.output.closed.wait(10)  # passes while the other's clip is still being encoded
        assert not cloned.output.closed.is_set()
        voices.release.set()
        assert cloned.output.closed.wait(10)
    finally:
        pipeline.close()
    assert words.payloads == [None, None]  # stage 0: the request alone
    assert sorted(w.text for w in spell.firsts) == ["cloned", "plain"]  # stage 2: the first word, through stage 1
    assert sorted(spell.fed) == sorted(["voice", "here", "words", "go", "first"])
    for r in (cloned, plain):
        assert r.output.error is None and r.prepared == f"voice of {r.request_id}"
        assert [float(p[0]) for p in r.output.pieces] == [len(w) for w in r.text.split()]  # every word, in order
    assert all(stage.active_requests() == [] for stage in stages)


def test_a_prepare_stage_holds_what_comes_until_the_request_is_prepared_then_passes_it_on_in_order():
    voices = Voices()
    stage = PrepareStage("voices", voices)
    r = request("x", "clip")
    first, second, last = StageItem(r, "a"), StageItem(r, "b"), StageItem(r, "c", finished=True)
    stage.add(first)
    stage.add(second)
    assert stage.step() == []  # the clip is being encoded
    stage.add(last)
    voices.release.set()
    passed: list[StageItem] = []
    for _ in range(2000):
        passed += stage.step()
        if passed:
            break
    assert passed == [first, second, last] and r.prepared == "voice of x"
    assert stage.active_requests() == [] and not stage.has_work()  # forgotten with its last input


def test_a_prepared_request_passes_later_outputs_straight_on_and_is_kept_until_its_last():
    stage = PrepareStage("voices", Voices())
    r = request("x")
    stage.add(StageItem(r, "a"))
    assert [i.payload for i in stage.step()] == ["a"] and stage.active_requests() == [r]
    assert not stage.has_work()  # nothing to pass on until more comes
    stage.add(StageItem(r, "b", finished=True))
    assert [(i.payload, i.finished) for i in stage.step()] == [("b", True)] and stage.active_requests() == []


def test_a_stage_0_item_is_the_whole_input_of_its_request():
    stage = PrepareStage("voices", Voices())
    r = request("x")
    item = StageItem(r)
    stage.add(item)
    assert stage.step() == [item] and stage.active_requests() == []


@dataclass
class Spoken:
    """An utterance model after another stage: one piece per word of the whole unit the stage before made."""

    payloads: list[object] = field(default_factory=list)

    def synthesize(self, request, payload):
        self.payloads.append(payload)
        for word in payload.text.split():
            yield np.full(len(word), float(len(word)), dtype=np.float32)


@dataclass
class Sentences(IterativeModel):
    """Stage 0: a request's whole text as one unit, in one step."""

    def start(self, request, payload):
        return WordsJob(request, [request.text])

    def step(self, jobs):
        for job in jobs:
            job.said = 1
        return [[Word(job.words[0].upper(), True)] for job in jobs]


def test_an_utterance_stage_after_another_gets_the_unit_the_stage_before_made():
    spoken = Spoken()
    pipeline = Pipeline([IterativeStage("sentences", Sentences()), UtteranceStage("speak", spoken, lanes=2)])
    requests = [request("one unit of text"), request("another")]
    try:
        for r in requests:
            pipeline.submit(r)
        assert all(r.output.closed.wait(10) for r in requests)
    finally:
        pipeline.close()
    assert sorted(p.text for p in spoken.payloads) == ["ANOTHER", "ONE UNIT OF TEXT"]  # the payload, not the request
    for r in requests:
        assert r.output.error is None
        assert [float(p[0]) for p in r.output.pieces] == [len(w) for w in r.text.split()]


def test_an_utterance_stage_fed_a_second_payload_fails_that_request_alone():
    spoken = Spoken()
    pipeline = Pipeline([IterativeStage("words", Words()), UtteranceStage("speak", spoken)])
    streamed, single = request("two words"), request("single")
    try:
        pipeline.submit(streamed)
        pipeline.submit(single)
        assert streamed.output.closed.wait(10) and single.output.closed.wait(10)
    finally:
        pipeline.close()
    assert "one input per request" in str(streamed.output.error)
    assert single.output.error is None and [float(p[0]) for p in single.output.pieces] == [6.0]
