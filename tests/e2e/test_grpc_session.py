"""The incremental Synthesize session end to end: units as text arrives, pipelining, flush, clear, idle flush."""

from __future__ import annotations

import asyncio
import random
import time

import grpc
import pytest

from vocalis.clients.aio import AsyncClient, AsyncTextSession
from vocalis.clients.errors import VocalisError
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}


def config(splitting: pb.TextSplitting | None = None, **fields) -> pb.SessionConfig:
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **fields)
    message.extra_params.update(NOISELESS)
    if splitting is not None:
        message.text_splitting.CopyFrom(splitting)
    return message


@pytest.fixture
async def client(server):
    async with AsyncClient(server.grpc_target, timeout=60) as c:
        yield c


class Recorder:
    """Reads a session's responses in the background, with their arrival times."""

    def __init__(self, session: AsyncTextSession) -> None:
        self.session = session
        self.responses: list[tuple[float, pb.SynthesizeResponse]] = []
        self._arrived = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for response in self.session:
            self.responses.append((time.monotonic(), response))
            self._arrived.set()

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 30) -> float:
        """Wait until `count` responses of `kind` arrived; the arrival time of the last of them."""
        async with asyncio.timeout(timeout):
            while True:
                times = [t for t, r in self.responses if r.WhichOneof("response") == kind]
                if len(times) >= count:
                    return times[count - 1]
                if self.task.done():
                    self.task.result()
                    raise AssertionError(f"session ended with {len(times)} {kind}")
                self._arrived.clear()
                await self._arrived.wait()

    async def finish(self) -> list[pb.SynthesizeResponse]:
        await asyncio.wait_for(self.task, 60)
        return [r for _, r in self.responses]

    def kinds(self) -> list[str]:
        return [r.WhichOneof("response") for _, r in self.responses]


def utterances(responses: list[pb.SynthesizeResponse]) -> list[tuple[tuple[int, int], bytes]]:
    """(text span, audio) of every utterance, in order."""
    audio: dict[int, bytearray] = {}
    done = []
    for response in responses:
        kind = response.WhichOneof("response")
        if kind == "audio" and response.audio.num_samples:
            audio.setdefault(response.audio.utterance_index, bytearray()).extend(response.audio.audio)
        elif kind == "utterance_done":
            span = response.utterance_done.text_span
            done.append(((span.start, span.end), bytes(audio.get(response.utterance_done.utterance_index, b""))))
    return done


async def run_pieces(client: AsyncClient, pieces: list[str], pause: float = 0.0) -> list[pb.SynthesizeResponse]:
    async with await client.session(config()) as session:
        recorder = Recorder(session)
        for piece in pieces:
            await session.send(piece)
            if pause:
                await asyncio.sleep(pause)
        await session.end()
        return await recorder.finish()


async def test_three_utterances_on_one_session(client):
    text = ["The first sentence is here. ", "Then comes the second one. ", "And the third one ends it."]
    responses = await run_pieces(client, text, pause=0.1)
    assert responses[0].WhichOneof("response") == "session_started"
    assert responses[-1].WhichOneof("response") == "session_done"
    done = utterances(responses)
    whole = "".join(text)
    assert [whole[a:b] for (a, b), _ in done] == [t.strip() for t in text]
    assert all(len(audio) > 22050 for _, audio in done)  # each over half a second
    indices = [r.audio.utterance_index for r in responses if r.WhichOneof("response") == "audio" and r.audio.num_samples]
    assert indices == sorted(indices) and set(indices) == {0, 1, 2}
    assert responses[-1].session_done.utterance_count == 3


async def test_text_split_anywhere_gives_the_same_units_and_audio(client):
    text = 'Dr. Smith paid 3.50 dollars, i.e. not much. "Really?!" she asked. Yes... it was cheap.'
    whole = utterances(await run_pieces(client, [text]))
    assert [text[a:b] for (a, b), _ in whole] == ["Dr. Smith paid 3.50 dollars, i.e. not much.", '"Really?!"', "she asked.", "Yes...", "it was cheap."]
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(1, len(text)), 25))  # mid-word and mid-sentence
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert utterances(await run_pieces(client, pieces, pause=0.01)) == whole


async def test_units_are_spoken_while_text_keeps_arriving(client):
    async with await client.session(config()) as session:
        recorder = Recorder(session)
        await session.send("This sentence is complete. This one is not")
        # No flush and no end: the complete sentence is synthesized at once.
        await recorder.wait_for("utterance_done", timeout=20)
        await session.send(" yet, but now it is.")
        await session.end()
        responses = await recorder.finish()
    text = "This sentence is complete. This one is not yet, but now it is."
    assert [text[a:b] for (a, b), _ in utterances(responses)] == ["This sentence is complete.", "This one is not yet, but now it is."]


async def test_the_next_unit_is_in_the_engine_before_the_first_is_spoken(client):
    long_first = "This first sentence is rather long, so that the voice needs a good while to synthesize all of it. "
    responses = []
    # Whole sentences: auto would cut the long first sentence at its comma (a short first unit).
    async with await client.session(config(pb.TextSplitting(granularity=pb.SPLIT_GRANULARITY_SENTENCE))) as session:
        recorder = Recorder(session)
        await session.send(long_first + "Short second. Short third.")
        await session.end()
        responses = await recorder.finish()
        timed = recorder.responses
    first_audio = next(t for t, r in timed if r.WhichOneof("response") == "audio" and r.audio.utterance_index == 0)
    second_audio = next(t for t, r in timed if r.WhichOneof("response") == "audio" and r.audio.utterance_index == 1)
    second_done = next(r.utterance_done for _, r in timed if r.WhichOneof("response") == "utterance_done" and r.utterance_done.utterance_index == 1)
    admitted = second_audio - second_done.time_to_first_audio_seconds
    # Serially, unit 2 would enter the engine only after unit 1's audio was sent.
    assert admitted < first_audio, (admitted, first_audio)
    text = long_first + "Short second. Short third."
    assert [text[a:b] for (a, b), _ in utterances(responses)] == [long_first.strip(), "Short second.", "Short third."]


async def test_flush_ids_round_trip(client):
    async with await client.session(config()) as session:
        recorder = Recorder(session)
        await session.send("Complete sentence. Half")
        await session.flush("first-flush")
        await session.flush("empty-flush")  # nothing buffered: still answered
        await session.send(" and more.")
        await session.end()
        responses = await recorder.finish()
    kinds = [r.WhichOneof("response") for r in responses]
    flush_done = [r.flush_done.flush_id for r in responses if r.WhichOneof("response") == "flush_done"]
    assert flush_done == ["first-flush", "empty-flush"]
    first = kinds.index("flush_done")
    done = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert [(d.text_span.start, d.flush_id) for d in done] == [(0, ""), (19, "first-flush"), (24, "")]
    # FlushDone comes after the audio of the flushed unit, and that audio carries the flush id.
    flushed = [i for i, r in enumerate(responses) if r.WhichOneof("response") == "audio" and r.audio.flush_id == "first-flush"]
    assert flushed and max(flushed) < first
    assert kinds.index("utterance_done", max(flushed)) < first


async def test_clear_during_a_long_text_stops_audio_and_the_session_goes_on(client):
    long_text = " ".join(f"Sentence number {i} of a long answer that nobody wants to hear any more." for i in range(30))
    async with await client.session(config()) as session:
        recorder = Recorder(session)
        await session.send(long_text)
        await recorder.wait_for("audio")
        await session.clear()
        await recorder.wait_for("cleared")
        at_clear = len(recorder.responses)
        await session.send("After the clear.")
        await session.flush("after")
        await recorder.wait_for("flush_done")
        await session.end()
        responses = await recorder.finish()
    kinds = [r.WhichOneof("response") for r in responses]
    cleared = kinds.index("cleared")
    first_audio = kinds.index("audio")
    assert kinds[first_audio + 1 : cleared].count("audio") <= 1  # within one chunk
    assert "audio" in kinds[at_clear:]
    done = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert done[-1].flush_id == "after" and done[-1].text_span.start == len(long_text)
    assert len(done) <= 3  # the other 28 sentences were dropped, not synthesized
    assert kinds[-1] == "session_done"


async def test_idle_flush_speaks_a_stalled_sentence(client):
    splitting = pb.TextSplitting(idle_flush_ms=200)
    async with await client.session(config(splitting)) as session:
        recorder = Recorder(session)
        await session.send("No terminator and no flush")
        started = time.monotonic()
        arrived = await recorder.wait_for("utterance_done", timeout=10)
        await session.end()
        await recorder.finish()
    assert arrived - started > 0.2


async def test_granularity_none_and_clause(client):
    text = "Well, I think that is right, but who knows. Not me."
    for granularity, expected in [
        (pb.SPLIT_GRANULARITY_NONE, [text]),
        (pb.SPLIT_GRANULARITY_CLAUSE, ["Well, I think that is right,", "but who knows.", "Not me."]),
    ]:
        async with await client.session(config(pb.TextSplitting(granularity=granularity))) as session:
            recorder = Recorder(session)
            await session.send(text)
            await session.end()
            responses = await recorder.finish()
        assert [text[a:b] for (a, b), _ in utterances(responses)] == expected


@pytest.mark.parametrize(
    ("splitting", "field"),
    [
        (pb.TextSplitting(max_unit_chars=5), "text_splitting.max_unit_chars"),
        (pb.TextSplitting(idle_flush_ms=-1), "text_splitting.idle_flush_ms"),
    ],
)
async def test_bad_text_splitting_is_refused(client, splitting, field):
    with pytest.raises(VocalisError) as caught:
        async with await client.session(config(splitting)) as session:
            async for _ in session:
                pass
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT and caught.value.field == field


async def test_a_guessed_sentence_end_that_the_next_text_contradicts_is_never_spoken(client):
    async with await client.session(config()) as session:
        recorder = Recorder(session)
        await session.send("Visit example.")  # looks like a sentence end: synthesized at once, held back
        await asyncio.sleep(0.5)
        assert recorder.kinds() == ["session_started"]
        await session.send("com today. Then")  # it was not one
        await recorder.wait_for("utterance_done")
        await session.end()
        responses = await recorder.finish()
    text = "Visit example.com today. Then"
    assert [text[a:b] for (a, b), _ in utterances(responses)] == ["Visit example.com today.", "Then"]



def _varint_len(payload: bytes) -> bytes:
    n, out = len(payload), bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out) + payload


def nested_request(depth: int) -> bytes:
    """A SynthesizeRequest whose config's extra_params nests `depth` objects ({"a": {"a": ...}}), written by hand:
    protobuf refuses to build one deeper than its parser allows."""
    struct = b""
    for _ in range(depth):
        value = b"\x2a" + _varint_len(struct)  # Value.struct_value = 5
        entry = b"\x0a\x01a" + b"\x12" + _varint_len(value)  # map entry: key = 1, value = 2
        struct = b"\x0a" + _varint_len(entry)  # Struct.fields = 1
    config = b"\x82\x01" + _varint_len(struct)  # SessionConfig.extra_params = 16
    return b"\x0a" + _varint_len(config)  # SynthesizeRequest.config = 1


def raw_synthesize(server, messages: list[bytes]) -> grpc.RpcError:
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = channel.stream_stream("/vocalis.tts.v1.Synthesizer/Synthesize", request_serializer=bytes, response_deserializer=bytes)
        with pytest.raises(grpc.RpcError) as caught:
            list(call(iter(messages), timeout=30))
    return caught.value


TEXT = pb.SynthesizeRequest(text=pb.TextInput(text="Hi.")).SerializeToString()


@pytest.mark.parametrize(
    "messages",
    [
        [b"\xff\xff\xff\xff"],  # not a message at all
        [pb.SynthesizeRequest(config=pb.SessionConfig()).SerializeToString(), b"\x12\x05\x0a\x03\xed\xa0\x80"],  # a lone surrogate in UTF-8
        [nested_request(200), TEXT],  # deeper than protobuf parses
    ],
    ids=["garbage", "bad-utf8-text", "too-deep"],
)
def test_messages_that_do_not_parse_are_invalid_argument(server, messages):
    log_before = server.log_path.stat().st_size
    error = raw_synthesize(server, messages)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert "does not parse" in error.details()
    assert "Traceback" not in server.log_path.read_text()[log_before:]
    assert server.alive()


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"noise_scale": float("nan")}, "extra_params.noise_scale"), ({"noise_scale": float("inf")}, "extra_params.noise_scale")],
)
async def test_extra_params_json_cannot_hold_are_invalid_argument(client, server, extra, field):
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM)
    message.extra_params.update(extra)
    log_before = server.log_path.stat().st_size
    with pytest.raises(VocalisError) as caught:
        [r async for r in client.synthesize(message, "Hi.")]
    assert (caught.value.code, caught.value.field) == (grpc.StatusCode.INVALID_ARGUMENT, field)
    assert "Traceback" not in server.log_path.read_text()[log_before:]


def test_nesting_past_the_limit_is_invalid_argument(server):
    error = raw_synthesize(server, [nested_request(20), TEXT])
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "nest at most" in error.details()


async def test_a_flush_id_over_the_limit_is_refused(client):
    session = await client.session(config())
    await session.send("Hello.")
    await session.flush("f" * 257)
    with pytest.raises(VocalisError) as caught:
        async for _ in session:
            pass
    assert (caught.value.code, caught.value.field, caught.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT, "flush.flush_id", "FLUSH_ID_TOO_LONG",
    )  # fmt: skip
