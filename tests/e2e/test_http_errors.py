"""Bad input gets the right status and a message naming the problem; the server keeps serving."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import httpx
import pytest

from tests.serving import start_server
from vocalis.tts.v1 import synthesizer_pb2 as pb
from vocalis.tts.v1 import synthesizer_pb2_grpc


@pytest.fixture(scope="module")
def http(server) -> httpx.Client:
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        yield client


CASES = [
    ({"input": ""}, 400, "input", "empty"),
    ({"input": "   "}, 400, "input", "empty"),
    ({"input": "x" * 5001}, 400, "input", "5000"),
    ({"input": "Hi.", "voice": "nobody"}, 404, "voice", "nobody"),
    ({"input": "Hi.", "ref_audio": "data:audio/wav;base64,AAAA"}, 400, "ref_audio", "not supported"),
    ({"input": "Hi.", "speaker_embedding": [0.1, 0.2]}, 400, "speaker_embedding", "not supported"),
    ({"input": "Hi.", "extra_params": {"noise_scale": 3}}, 400, "extra_params.noise_scale", "2"),
    ({"input": "Hi.", "extra_params": {"noise_scale": "loud"}}, 400, "extra_params.noise_scale", "number"),
    ({"input": "Hi.", "language": "German"}, 400, "language", "German"),
    ({"input": 42}, 400, "input", "string"),
    ({"input": "Hi.", "speed": "fast"}, 400, "speed", "number"),
    ({"input": "Hi.", "speed": 9}, 400, "speed", "4"),
    ({"input": "Hi.", "speed": 0.1}, 400, "speed", "0.25"),
    ({"input": "Hi.", "response_format": "ogg"}, 400, "response_format", "wav"),
    ({"input": "Hi.", "model": "tts-99"}, 404, "model", "tts-99"),
    ({"input": "Hi.", "sample_rate": 1000}, 400, "sample_rate", "8000"),
    ({}, 400, "input", "required"),
    ({"input": "Hi.", "response_format": "mp3", "sample_rate": 16001}, 400, "sample_rate", "16001"),
]


@pytest.mark.parametrize(("body", "status", "param", "text"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_request(http, body, status, param, text):
    response = http.post("/v1/audio/speech", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status
    assert error["param"] == param, error
    assert text.lower() in error["message"].lower(), error
    assert error["type"] in ("invalid_request_error", "not_found_error")


def test_malformed_json(http):
    response = http.post("/v1/audio/speech", content=b'{"input": "Hi', headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "json" in response.json()["error"]["message"].lower()


def test_server_keeps_serving_after_errors(http, server):
    for body, *_ in CASES:
        http.post("/v1/audio/speech", json=body)
    assert server.alive()
    response = http.post("/v1/audio/speech", json={"input": "Still here."})
    assert response.status_code == 200 and response.content[:4] == b"RIFF"


def test_lone_surrogate_is_a_400(http):
    response = http.post("/v1/audio/speech", content=b'{"input": "a\\udc00b"}', headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text


RAW_CASES = [
    (b'{"input": "Hi.", "extra_params": {"noise_scale": NaN}}', "extra_params", "finite"),
    (b'{"input": "Hi.", "extra_params": {"noise_scale": -Infinity}}', "extra_params", "finite"),
    (('{"input": "Hi.", "extra_params": ' + '{"a": ' * 60 + "1" + "}" * 60 + "}").encode(), "extra_params", "nest"),
    (b'{"input": "Hi.", "extra_params": {"k": "a\\udc00b"}}', "extra_params", "unicode"),
    (b'{"input": "Hi.", "extra_params": {"a\\udc00b": 1}}', "extra_params", "unicode"),
    (b'{"input": "Hi.", "references": [{"audio_path": "\\ud800"}]}', "references.0.audio_path", "unicode"),
]


@pytest.mark.parametrize(("content", "param", "text"), RAW_CASES, ids=[str(i) for i in range(len(RAW_CASES))])
def test_json_a_session_config_cannot_carry_is_a_400_naming_the_field(http, server, content, param, text):
    log_before = server.log_path.stat().st_size
    response = http.post("/v1/audio/speech", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and text in error["message"].lower(), error
    assert "Traceback" not in server.log_path.read_text()[log_before:]


@pytest.mark.parametrize("authorization", [b"Bearer a\tb", b"Bearer caf\xc3\xa9", b"Bearer \x7f"])
def test_a_key_grpc_cannot_carry_is_a_401(http, server, authorization):
    log_before = server.log_path.stat().st_size
    response = http.post("/v1/audio/speech", json={"input": "Hi."}, headers={"authorization": authorization})
    assert response.status_code == 401, response.text
    assert response.json()["error"]["reason"] == "INVALID_AUTHORIZATION"
    assert "Traceback" not in server.log_path.read_text()[log_before:]


def test_a_field_too_large_for_a_grpc_message_is_a_413_not_a_429(http):
    response = http.post("/v1/audio/speech", json={"input": "Hi.", "instructions": "x" * 20_000_000})
    assert response.status_code == 413, response.text
    assert "Retry-After" not in response.headers
    assert "larger than" in response.json()["error"]["message"]


@pytest.mark.parametrize("timeout", ["0.000001", "0.001"])
def test_a_tiny_request_timeout_is_a_504_not_a_500(http, server, timeout):
    log_before = server.log_path.stat().st_size
    response = http.post("/v1/audio/speech", json={"input": "Hello there, this takes a moment."}, headers={"x-request-timeout": timeout})
    assert response.status_code == 504, response.text
    assert response.json()["error"]["type"] == "timeout_error"
    assert "Traceback" not in server.log_path.read_text()[log_before:]


KEY = "k-123"
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """A keyed server with room for two utterances at once and a 1 s idle timeout for sessions without text."""
    running = start_server(
        tmp_path_factory.mktemp("tight"), "--api-key", KEY, "--max-queued-requests", "2", "--session-idle-timeout", "1"
    )
    yield running
    running.stop()


def test_query_keys_are_only_for_websockets(tight):
    with httpx.Client(base_url=tight.http_url, timeout=60) as client:
        assert client.post(f"/v1/audio/speech?api_key={KEY}", json={"input": "Hi."}).status_code == 401
        assert client.post("/v1/audio/speech", json={"input": "Hi."}, headers=AUTH).status_code == 200


def test_an_abandoned_non_streaming_request_frees_its_slots_at_once(tight):
    long_text = "This sentence is one of very many in a long text that nobody will wait for. " * 60
    with httpx.Client(base_url=tight.http_url, timeout=httpx.Timeout(60, read=1.5)) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            # FLAC: a whole file, sent when done (WAV would stream as it is made, and the client would not time out)
            impatient.post("/v1/audio/speech", json={"input": long_text, "response_format": "flac"}, headers=AUTH)
    with httpx.Client(base_url=tight.http_url, timeout=60) as client:
        deadline = time.monotonic() + 5  # the long text alone takes many times this to synthesize
        while True:
            response = client.post("/v1/audio/speech", json={"input": "Next, please."}, headers=AUTH)
            if response.status_code != 429 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert response.status_code == 200, response.text


def test_a_grpc_session_with_a_config_and_no_text_times_out(tight):
    with grpc.insecure_channel(tight.grpc_target) as channel:
        stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
        release = threading.Event()

        def requests():
            yield pb.SynthesizeRequest(config=pb.SessionConfig())
            release.wait(30)  # never half-closes while the server waits

        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            list(stub.Synthesize(requests(), timeout=30, metadata=[("authorization", f"Bearer {KEY}")]))
        release.set()
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no text within 1 s" in caught.value.details()
    assert time.monotonic() - started < 10


async def test_slow_clients_are_closed_and_others_are_served(server):
    """64 connections that trickle a request head are closed within the head deadline; a normal request meanwhile is served."""
    host, port = "127.0.0.1", server.http_port
    slow = [await asyncio.open_connection(host, port) for _ in range(64)]
    for _, writer in slow:
        writer.write(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n")
    started = time.monotonic()
    closed = set()
    async with httpx.AsyncClient(base_url=server.http_url, timeout=60) as client:
        served = await client.post("/v1/audio/speech", json={"input": "Still serving."})
    assert served.status_code == 200
    while len(closed) < len(slow) and time.monotonic() - started < 30:
        for i, (reader, writer) in enumerate(slow):
            if i in closed:
                continue
            try:
                writer.write(b"X-Slow: 1\r\n")
                await writer.drain()
                if reader.at_eof() or await _closed(reader):
                    closed.add(i)
            except (ConnectionError, OSError):
                closed.add(i)
        await asyncio.sleep(1)
    for _, writer in slow:
        writer.close()
    assert len(closed) == len(slow), f"{len(slow) - len(closed)} slow connections still open after {time.monotonic() - started:.0f} s"


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.01) == b""
    except TimeoutError:
        return False
