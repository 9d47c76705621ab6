"""Session (plan, reader, writer) with a fake engine: order, marks, clear, admission and refusals, no model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from tests.server.fakes import RATE, FakeEngine, fake_model
from vocalis.server import session_config
from vocalis.server.config import Limits
from vocalis.server.errors import StatusError
from vocalis.server.session import Session
from vocalis.server.voice_resolver import ResolvedVoice
from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.text.text_carry import CarriedUnit
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb


class Caller:
    """The client's half of the call: messages the test sends, read by the session as they come."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[pb.SynthesizeRequest | None] = asyncio.Queue()

    def text(self, text: str) -> None:
        self.queue.put_nowait(pb.SynthesizeRequest(text=pb.TextInput(text=text)))

    def flush(self, flush_id: str) -> None:
        self.queue.put_nowait(pb.SynthesizeRequest(flush=pb.Flush(flush_id=flush_id)))

    def clear(self) -> None:
        self.queue.put_nowait(pb.SynthesizeRequest(clear=pb.Clear()))

    def end(self) -> None:
        self.queue.put_nowait(None)

    async def requests(self) -> AsyncIterator[pb.SynthesizeRequest]:
        while (request := await self.queue.get()) is not None:
            yield request


def open_session(engine: FakeEngine, limits: Limits | None = None, model: LoadedModel | None = None, **config: object) -> Session:
    model = model or fake_model()
    session = pb.SessionConfig(**{"encoding": audio_pb2.AUDIO_ENCODING_PCM, **config})
    session.text_splitting.idle_flush_ms = 0
    settings = session_config.validate(session, model, limits or Limits())
    resolved = session_config.resolve(settings, ResolvedVoice("alice", "alice", None))
    splitter = session_config.text_splitter(session)
    return Session(engine, limits or Limits(), resolved, splitter, "test-session", session.delivery)  # type: ignore[arg-type]


def kinds(responses: list[pb.SynthesizeResponse]) -> list[str]:
    return [r.WhichOneof("response") for r in responses]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_units_flushes_and_the_end_come_in_order_with_their_audio():
    engine, caller = FakeEngine(auto=True), Caller()
    session = open_session(engine)
    caller.text("One two. Three four five. ")
    caller.flush("f1")
    caller.text("Six.")
    caller.end()
    responses = [r async for r in session.run(caller.requests())]
    assert [job.text for job in engine.jobs] == ["One two.", "Three four five.", "Six."]
    assert kinds(responses) == [
        "audio", "utterance_done", "audio", "utterance_done", "flush_done", "audio", "utterance_done", "session_done",
    ]  # fmt: skip
    audio = [r.audio for r in responses if r.HasField("audio")]
    assert [a.num_samples for a in audio] == [200, 300, 100]
    assert sum(len(a.audio) for a in audio) == 600 * 2  # PCM16
    assert [a.sample_offset for a in audio] == [0, 200, 500]
    assert responses[4].flush_done.flush_id == "f1"
    assert [r.utterance_done.text_span.start for r in responses if r.HasField("utterance_done")] == [0, 9, 26]
    done = responses[-1].session_done
    assert (done.utterance_count, done.num_samples) == (3, 600)
    assert done.audio_seconds == pytest.approx(600 / RATE)


async def test_no_more_than_max_units_in_flight_and_the_next_goes_in_when_one_is_done():
    engine, caller = FakeEngine(), Caller()
    session = open_session(engine, Limits(max_units_in_flight=2))
    responses = session.run(caller.requests())
    caller.text("A one. B two. C three. D four.")
    caller.flush("all")
    first = asyncio.ensure_future(anext(responses))
    await settle()
    assert [job.text for job in engine.jobs] == ["A one.", "B two."]
    engine.jobs[0].give(10)
    assert (await first).audio.num_samples == 10
    engine.jobs[0].end()
    assert (await anext(responses)).HasField("utterance_done")
    waiting = asyncio.ensure_future(anext(responses))  # the writer moves on to unit B
    await settle()
    assert [job.text for job in engine.jobs] == ["A one.", "B two.", "C three."]
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await responses.aclose()
    assert all(job.released for job in engine.jobs)  # the caller left: every unit in the engine was aborted


async def test_clear_stops_the_unit_being_spoken_and_keeps_every_flush_answered():
    engine, caller = FakeEngine(), Caller()
    session = open_session(engine)
    responses = session.run(caller.requests())
    caller.text("First sentence here. Second one. ")
    caller.flush("before")
    engine_started = asyncio.ensure_future(anext(responses))
    await settle()
    engine.jobs[0].give(50)
    assert (await engine_started).HasField("audio")
    caller.clear()
    await settle()
    assert engine.jobs[0].aborted and engine.jobs[1].aborted
    rest = []
    caller.text("After.")
    caller.end()
    await settle()
    engine.jobs[2].give(20)
    engine.jobs[2].end()
    rest = [r async for r in responses]
    assert kinds(rest) == ["flush_done", "cleared", "audio", "utterance_done", "session_done"]
    assert rest[0].flush_done.flush_id == "before"
    assert rest[3].utterance_done.utterance_index == 1  # the cleared unit had index 0 and no UtteranceDone


async def test_a_unit_refused_with_nothing_else_in_flight_fails_the_session():
    engine, caller = FakeEngine(capacity=0), Caller()
    session = open_session(engine)
    caller.text("Nobody has room for this.")
    caller.end()
    with pytest.raises(StatusError) as caught:
        [r async for r in session.run(caller.requests())]
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_a_unit_that_fails_in_the_engine_fails_the_session_with_its_error():
    engine, caller = FakeEngine(), Caller()
    session = open_session(engine)
    responses = session.run(caller.requests())
    caller.text("This breaks.")
    caller.end()
    pending = asyncio.ensure_future(anext(responses))
    await settle()
    engine.jobs[0].fail(StatusError(grpc.StatusCode.INTERNAL, "the stage broke", "SYNTHESIS_FAILED"))
    with pytest.raises(StatusError, match="the stage broke"):
        await pending


@pytest.mark.parametrize(
    ("limits", "texts", "reason"),
    [
        (Limits(), ["   "], "EMPTY_INPUT"),
        (Limits(max_input_chars=30, max_buffered_chars=30), ["x" * 20, "y" * 20], "INPUT_TOO_LONG"),
        (Limits(max_input_chars=1000, max_buffered_chars=30), ["x" * 20, "y" * 20], "BUFFER_FULL"),
    ],
)
async def test_text_the_session_cannot_take_is_invalid_argument_on_text(limits, texts, reason):
    engine, caller = FakeEngine(auto=True), Caller()
    session = open_session(engine, limits)
    for text in texts:
        caller.text(text)
    caller.end()
    with pytest.raises(StatusError) as caught:
        [r async for r in session.run(caller.requests())]
    assert (caught.value.code, caught.value.field, caught.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "text", reason)


async def test_a_guess_is_synthesized_early_and_dropped_when_the_next_text_contradicts_it():
    engine, caller = FakeEngine(auto=True), Caller()
    session = open_session(engine)
    responses = session.run(caller.requests())
    caller.text("Visit example.")
    first = asyncio.ensure_future(anext(responses))
    await settle()
    assert [job.text for job in engine.jobs] == ["Visit example."]  # a guess: it looks like a sentence end
    caller.text("com today.")
    caller.end()
    rest = [await first] + [r async for r in responses]
    assert engine.jobs[0].aborted
    assert [job.text for job in engine.jobs[1:]] == ["Visit example.com today."]
    assert kinds(rest) == ["audio", "utterance_done", "session_done"]


async def test_file_per_utterance_sends_each_unit_as_a_whole_wav():
    engine, caller = FakeEngine(auto=True), Caller()
    session = open_session(engine, delivery=pb.AUDIO_DELIVERY_FILE_PER_UTTERANCE, encoding=audio_pb2.AUDIO_ENCODING_WAV)
    caller.text("One two. Three.")
    caller.end()
    responses = [r async for r in session.run(caller.requests())]
    files = [r.audio.audio for r in responses if r.HasField("audio")]
    assert len(files) == 2 and all(f.startswith(b"RIFF") for f in files)
    assert [r.audio.num_samples for r in responses if r.HasField("audio")] == [200, 100]


async def refused(session: Session, caller: Caller) -> StatusError:
    with pytest.raises(StatusError) as caught:
        [r async for r in session.run(caller.requests())]
    return caught.value


async def test_a_flush_id_over_the_limit_is_refused_by_name():
    caller = Caller()
    session = open_session(FakeEngine(auto=True), Limits(max_flush_id_chars=8))
    caller.text("Hello there.")
    caller.flush("f" * 9)
    caller.end()
    error = await refused(session, caller)
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "flush.flush_id", "FLUSH_ID_TOO_LONG")


async def test_flushes_and_clears_a_client_never_reads_are_bounded():
    engine, caller = FakeEngine(), Caller()  # the engine never finishes: nothing is answered
    session = open_session(engine, Limits(max_pending_marks=5))
    caller.text("Stuck here.")
    for i in range(6):
        caller.flush(str(i)) if i % 2 else caller.clear()
    caller.end()
    error = await refused(session, caller)
    assert (error.field, error.reason) == ("flush", "TOO_MANY_PENDING")  # the sixth, a flush
    assert all(job.released for job in engine.jobs)


async def test_the_plan_is_bounded_even_for_tiny_units():
    engine, caller = FakeEngine(), Caller()  # admits, never finishes
    session = open_session(engine, Limits(max_plan_entries=10, max_units_in_flight=1))
    caller.text("Here is one more sentence. " * 20)
    caller.end()
    error = await refused(session, caller)
    assert (error.field, error.reason) == ("text", "PLAN_FULL")
    assert all(job.released for job in engine.jobs)


async def test_a_session_with_a_config_and_no_text_times_out():
    caller = Caller()
    session = open_session(FakeEngine(auto=True), Limits(session_idle_timeout_s=0.2))
    caller.flush("no text yet")  # not text: it does not keep the session open
    started = asyncio.get_running_loop().time()
    error = await refused(session, caller)
    assert (error.code, error.reason) == (grpc.StatusCode.DEADLINE_EXCEEDED, "IDLE_TIMEOUT")
    assert asyncio.get_running_loop().time() - started < 5


async def test_text_in_time_keeps_the_session_past_the_idle_timeout():
    caller = Caller()
    session = open_session(FakeEngine(auto=True), Limits(session_idle_timeout_s=0.2))
    caller.text("In time.")
    caller.flush("now")
    responses = session.run(caller.requests())
    assert (await anext(responses)).HasField("audio")
    await asyncio.sleep(0.4)
    caller.end()
    assert kinds([r async for r in responses]) == ["utterance_done", "flush_done", "session_done"]


class MarkerCarry:
    """A family's text carry: the last `@name` of the text so far leads each unit after it; `@open` left at the end
    of the input is refused."""

    def unit(self, context: str, text: str) -> CarriedUnit:
        markers = [word for word in text.split() if word.startswith("@")]
        return CarriedUnit(f"[{context}] {text}" if context else text, markers[-1] if markers else context)

    def end(self, context: str) -> None:
        if context == "@open":
            raise InvalidField("text", "UNCLOSED", "@open must be closed before the end of the input")


async def collect(responses: AsyncIterator[pb.SynthesizeResponse]) -> list[pb.SynthesizeResponse]:
    return [r async for r in responses]


def carrying_model() -> LoadedModel:
    model = fake_model()
    model.text_carry = MarkerCarry()
    return model


async def test_a_family_text_carry_rewrites_each_unit_from_the_committed_units_before_it():
    """A guess is rewritten from the committed context and advances it only once confirmed; a contradicted guess
    leaves no trace; a Clear starts afresh. The engine gets the rewritten text, the client's utterances stay as sent."""
    engine, caller = FakeEngine(auto=True), Caller()
    session = open_session(engine, model=carrying_model())
    responses = asyncio.ensure_future(collect(session.run(caller.requests())))
    caller.text("@ann Hello there. How are")
    caller.text(" you. Then @bob wait.")  # "Then @bob wait." is a guess: "wait.5" would not end there
    await settle()
    assert [job.text for job in engine.jobs] == ["@ann Hello there.", "[@ann] How are you.", "[@ann] Then @bob wait."]
    caller.text("5 miles. Go.")  # the guess was wrong: its unit grows, then "Go." is guessed after @bob
    await settle()
    assert engine.jobs[2].aborted
    assert [job.text for job in engine.jobs[3:]] == ["[@ann] Then @bob wait.5 miles.", "[@bob] Go."]
    caller.text(" Yes.")  # confirms "Go.": "Yes." follows it with @bob
    await settle()
    assert engine.jobs[-1].text == "[@bob] Yes." and not engine.jobs[4].aborted
    caller.clear()
    caller.text("After.")
    caller.end()
    done = await responses
    assert engine.jobs[-1].text == "After."  # a Clear forgets the context
    last = [r.utterance_done for r in done if r.HasField("utterance_done")][-1]
    assert (last.text_span.start, last.text_span.end) == (63, 69)  # the span of "After." as the client sent it


async def test_a_family_text_carry_refuses_what_the_input_left_open():
    caller = Caller()
    session = open_session(FakeEngine(auto=True), model=carrying_model())
    caller.text("@open Hello. There.")
    caller.end()
    error = await refused(session, caller)
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "text", "UNCLOSED")
