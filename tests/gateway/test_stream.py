"""The WebSocket router against a stand-in upstream: timeouts, in-band failure after audio, cancel on disconnect."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from fastapi.testclient import TestClient

from vocalis.clients.errors import VocalisError
from vocalis.gateway.app import create_app
from vocalis.gateway.config import GatewayConfig, StreamLimits
from vocalis.gateway.stream_protocol import PATH, parse_config
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

STARTED = pb.SynthesizeResponse(session_started=pb.SessionStarted(sample_rate=24000, channels=1, encoding=audio_pb2.AUDIO_ENCODING_PCM))


class FakeSession:
    """Plays back `responses`, then raises `error` or stays open."""

    def __init__(self, responses: list[pb.SynthesizeResponse], error: VocalisError | None) -> None:
        self.responses = responses
        self.error = error
        self.sent: list[tuple[str, str]] = []
        self.cancelled = False

    async def send(self, text: str) -> None:
        self.sent.append(("text", text))

    async def flush(self, flush_id: str = "") -> None:
        self.sent.append(("flush", flush_id))

    async def clear(self) -> None:
        self.sent.append(("clear", ""))

    async def end(self) -> None:
        self.sent.append(("end", ""))

    def cancel(self) -> None:
        self.cancelled = True

    async def __aiter__(self):
        for response in self.responses:
            yield response
        if self.error is not None:
            raise self.error
        await asyncio.Event().wait()


class FakeUpstream:
    def __init__(self, responses: list[pb.SynthesizeResponse], error: VocalisError | None = None) -> None:
        self.responses = responses
        self.error = error
        self.sessions: list[FakeSession] = []
        self.configs: list[pb.SessionConfig] = []

    async def session(self, config: pb.SessionConfig) -> FakeSession:
        self.configs.append(config)
        self.sessions.append(FakeSession(self.responses, self.error))
        return self.sessions[-1]

    def with_metadata(self, metadata) -> FakeUpstream:
        return self  # the caller's credentials: nothing to check here

    async def close(self) -> None:
        pass


@pytest.fixture
def gateway():
    def make(upstream: FakeUpstream, **limits) -> TestClient:
        app = create_app("127.0.0.1:1", GatewayConfig(stream=StreamLimits(**limits)))
        client = TestClient(app)
        client.__enter__()
        app.state.upstream = upstream
        made.append(client)
        return client

    made: list[TestClient] = []
    yield make
    for client in made:
        client.__exit__(None, None, None)


def closed_with(ws) -> int:
    message = ws.receive()
    assert message["type"] == "websocket.close", message
    return message["code"]


def test_config_must_come_in_time(gateway):
    client = gateway(FakeUpstream([STARTED]), first_config_timeout_s=0.2)
    with client.websocket_connect(PATH) as ws:
        started = time.monotonic()
        error = ws.receive_json()
        assert error["type"] == "error" and error["reason"] == "CONFIG_TIMEOUT" and error["code"] == 408
        assert closed_with(ws) == 1008
        assert time.monotonic() - started < 5


def test_an_oversize_first_message_closes_with_1009(gateway):
    client = gateway(FakeUpstream([STARTED]), max_config_chars=100)
    with client.websocket_connect(PATH) as ws:
        ws.send_json({"type": "session.config", "voice": "x" * 200})
        assert ws.receive_json()["reason"] == "MESSAGE_TOO_LARGE"
        assert closed_with(ws) == 1009


def test_an_idle_socket_is_closed(gateway):
    upstream = FakeUpstream([STARTED])
    client = gateway(upstream, idle_timeout_s=0.3)
    with client.websocket_connect(PATH) as ws:
        ws.send_json({"type": "session.config", "response_format": "pcm", "stream_audio": True})
        assert ws.receive_json()["type"] == "session.configured"
        error = ws.receive_json()
        assert error["reason"] == "IDLE_TIMEOUT"
        assert closed_with(ws) == 1008
    assert upstream.sessions[0].cancelled  # the gRPC call goes with the socket


def test_a_failure_after_audio_is_in_band_with_partial_audio(gateway):
    chunk = pb.SynthesizeResponse(audio=pb.AudioChunk(audio=b"\x01\x02" * 50, utterance_index=0, text_span=pb.TextSpan(start=0, end=5)))
    failure = VocalisError(grpc.StatusCode.INTERNAL, "the stage failed", "SYNTHESIS_FAILED")
    client = gateway(FakeUpstream([STARTED, chunk], failure))
    with client.websocket_connect(PATH) as ws:
        ws.send_json({"type": "session.config", "response_format": "pcm", "stream_audio": True})
        ws.send_json({"type": "input.text", "text": "Hello"})
        configured = ws.receive_json()
        assert (configured["type"], configured["sample_rate"], configured["response_format"]) == ("session.configured", 24000, "pcm")
        start = ws.receive_json()
        assert (start["type"], start["sample_rate"], start["format"]) == ("audio.start", 24000, "pcm")  # the real rate
        assert ws.receive_bytes() == b"\x01\x02" * 50
        error = ws.receive_json()
        assert error == {
            "type": "error",
            "message": "the stage failed",
            "code": 500,
            "reason": "SYNTHESIS_FAILED",
            "param": None,
            "partial_audio": True,
            "action": "discard",
        }
        done = ws.receive_json()
        assert (done["type"], done["error"], done["total_bytes"]) == ("audio.done", True, 100)
        assert closed_with(ws) == 1011


def test_a_disconnect_cancels_the_call(gateway):
    upstream = FakeUpstream([STARTED])
    client = gateway(upstream)
    with client.websocket_connect(PATH) as ws:
        ws.send_json({"type": "session.config"})
        ws.send_json({"type": "input.text", "text": "Bye"})
    deadline = time.monotonic() + 5
    while not (upstream.sessions and upstream.sessions[0].cancelled) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert upstream.sessions[0].cancelled
    assert upstream.sessions[0].sent == [("text", "Bye")]


def test_session_close_without_text_closes_at_once(gateway):
    client = gateway(FakeUpstream([STARTED]))
    with client.websocket_connect(PATH) as ws:
        ws.send_json({"type": "session.config"})
        ws.send_json({"type": "session.close"})
        assert ws.receive_json()["type"] == "session.configured"
        assert closed_with(ws) == 1000


def test_config_maps_field_for_field():
    config = parse_config(
        {
            "type": "session.config",
            "voice": "alice",
            "response_format": "pcm",
            "stream_audio": True,
            "speed": 1.5,
            "split_granularity": "clause",
            "max_unit_chars": 80,
            "idle_flush_ms": 0,
        }
    )
    session = config.session
    assert (session.voice, session.encoding, session.speed) == ("alice", audio_pb2.AUDIO_ENCODING_PCM, 1.5)
    assert session.delivery == pb.AUDIO_DELIVERY_STREAM and config.stream_audio
    assert session.text_splitting.granularity == pb.SPLIT_GRANULARITY_CLAUSE
    assert session.text_splitting.max_unit_chars == 80 and session.text_splitting.HasField("idle_flush_ms")
    default = parse_config({"type": "session.config"})
    assert default.session.encoding == audio_pb2.AUDIO_ENCODING_WAV and default.session.delivery == pb.AUDIO_DELIVERY_FILE_PER_UTTERANCE
    assert not default.session.text_splitting.HasField("max_unit_chars")


class FloodingSocket:
    """A client that sends `size`-character text frames as fast as the gateway reads them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.reads = 0

    async def receive(self) -> dict:
        self.reads += 1
        return {"type": "websocket.receive", "text": "x" * self.size}


async def test_a_full_inbox_stops_reading_the_socket_until_it_drains():
    from vocalis.gateway.stream import StreamSession

    socket = FloodingSocket(2**20)
    session = StreamSession(socket, FakeUpstream([STARTED]), StreamLimits(max_inbox_bytes=4 * 2**20))  # type: ignore[arg-type]
    receiving = asyncio.create_task(session._receive())
    await asyncio.sleep(0.2)
    assert socket.reads <= 5 and session.inbox.bytes <= 4 * 2**20  # 3 frames queued, the 4th read and waiting
    await session.inbox.get()
    await asyncio.sleep(0.05)
    assert socket.reads == 5  # one frame out, one more read in
    receiving.cancel()


async def test_oversize_frames_are_queued_as_their_size_only():
    from vocalis.gateway.inbox import Oversize
    from vocalis.gateway.stream import StreamSession

    socket = FloodingSocket(3 * 2**20)
    session = StreamSession(socket, FakeUpstream([STARTED]), StreamLimits(max_config_chars=2**20, max_inbox_bytes=2**20))  # type: ignore[arg-type]
    receiving = asyncio.create_task(session._receive())
    await asyncio.sleep(0.2)
    receiving.cancel()
    assert isinstance(await session.inbox.get(), Oversize)
    assert session.inbox.bytes < 2**20 and socket.reads < 2**20 // 1024 + 2  # bounded by the per-entry cost
