"""The attack corpus (corpus.py) replayed on every run: each input gets its client status, never a 5xx, a
traceback or a dead process."""

from __future__ import annotations

import asyncio
import json

import grpc
import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from tests.fuzz import corpus
from tests.serving import start_server
from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import VocalisError
from vocalis.tts.v1 import synthesizer_pb2 as pb

SERVER_FAULTS = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS}
AUDIO_CAP_S = 10
"""The victim server's --max-audio-seconds: past it a session ends with 413 / RESOURCE_EXHAUSTED, a client status.
Under one ONNX run's audio (MAX_IDS_PER_RUN ids, about 12 s), so a long unit's session ends after its first, largest
run: later runs are the same size and add time, not coverage."""


def new_log(server, since: int) -> str:
    return server.log_path.read_text(errors="replace")[since:]


@pytest.mark.parametrize(("body", "status"), corpus.HTTP_BODIES, ids=[str(i) for i in range(len(corpus.HTTP_BODIES))])
def test_http_bodies(server, body, status):
    since = server.log_path.stat().st_size
    response = httpx.post(f"{server.http_url}/v1/audio/speech", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == status, response.text[:300]
    assert "Traceback" not in new_log(server, since)


@pytest.mark.parametrize("authorization", corpus.AUTHORIZATIONS)
def test_authorization_headers(server, authorization):
    since = server.log_path.stat().st_size
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hi."}, headers={"authorization": authorization}, timeout=60)
    assert response.status_code == 401, response.text[:300]
    assert "Traceback" not in new_log(server, since)


@pytest.mark.parametrize("messages", corpus.GRPC_STREAMS, ids=[str(i) for i in range(len(corpus.GRPC_STREAMS))])
def test_grpc_streams(server, messages):
    since = server.log_path.stat().st_size
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = channel.stream_stream("/vocalis.tts.v1.Synthesizer/Synthesize", request_serializer=bytes, response_deserializer=bytes)
        try:
            list(call(iter(messages), timeout=60))
        except grpc.RpcError as error:
            assert error.code() not in SERVER_FAULTS, (error.code(), error.details())
    assert "Traceback" not in new_log(server, since)
    assert server.alive()


@pytest.fixture(scope="module")
def victim(tmp_path_factory):
    """A server of its own: if a text does take the process down, the other tests' server is unharmed."""
    # A long unit is minutes of audio (300 CJK characters spelled out); the cap ends each face's session after its
    # first run, as a deployment's cap would, and the WebSocket, whose first audio may queue behind the other faces',
    # gets more than the default idle timeout (30 s) on a loaded machine.
    running = start_server(tmp_path_factory.mktemp("victim"), "--max-audio-seconds", str(AUDIO_CAP_S), "--ws-idle-timeout", "180")
    yield running
    running.stop()


async def _grpc(target: str, text: str) -> None:
    async with AsyncClient(target, timeout=120) as client:
        try:
            [r async for r in client.synthesize(pb.SessionConfig(), text)]
        except VocalisError as error:
            assert error.code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS), error


async def _http(url: str, text: str) -> None:
    async with httpx.AsyncClient(timeout=120) as client:
        response = await client.post(f"{url}/v1/audio/speech", json={"input": text})
        assert response.status_code in (200, 400, 413, 500), response.text[:300]


async def _ws(port: int, text: str) -> None:
    async with connect(f"ws://127.0.0.1:{port}/v1/audio/speech/stream", max_size=None) as ws:
        await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True}))
        await ws.send(json.dumps({"type": "input.text", "text": text}))
        await ws.send(json.dumps({"type": "session.close"}))
        frames = []
        try:
            async for frame in ws:
                frames.append(frame)
        except ConnectionClosedError as closed:  # an error frame, then 1011 (a failed synthesis) or 1009 (the cap)
            assert closed.rcvd is not None and closed.rcvd.code in (1011, 1009), closed
            errors = [json.loads(f) for f in frames if isinstance(f, str) and json.loads(f)["type"] == "error"]
            assert errors and errors[-1]["code"] == (500 if closed.rcvd.code == 1011 else 413), frames[-3:]


@pytest.mark.parametrize("text", corpus.CRASH_TEXTS + corpus.LONG_UNITS, ids=lambda t: t[:12])
async def test_attack_texts_fail_alone_on_every_face(victim, text):
    """Each text over gRPC, HTTP and the WebSocket at once, beside an ordinary request: the ordinary one is served and the process lives."""
    ordinary = _http(victim.http_url, "An ordinary sentence, spoken meanwhile.")
    await asyncio.gather(_grpc(victim.grpc_target, text), _http(victim.http_url, text), _ws(victim.http_port, text), ordinary)
    assert victim.alive(), f"the server died on {text[:20]!r}: {victim.log_path.read_text()[-2000:]}"
    response = httpx.post(f"{victim.http_url}/v1/audio/speech", json={"input": "Still here."}, timeout=60)
    assert response.status_code == 200


async def test_websocket_frames(server):
    since = server.log_path.stat().st_size
    async with connect(f"ws://127.0.0.1:{server.http_port}/v1/audio/speech/stream", max_size=None) as ws:
        await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True}))
        configured = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert configured["type"] == "session.configured", configured
        for frame in corpus.WS_FRAMES:
            await ws.send(frame)
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert reply["type"] == "error" and reply["code"] < 500, (frame[:60], reply)
        await ws.send(json.dumps({"type": "input.text", "text": "Still here."}))
        await ws.send(json.dumps({"type": "session.close"}))
        frames = [frame async for frame in ws]
    assert any(isinstance(frame, bytes) for frame in frames)
    assert "Traceback" not in new_log(server, since)
