"""A deadline or the audio cap never cuts a response silently: a whole file gets a proper status (504, 413), a raw
stream ends without its last chunk (the client's HTTP library says so), SSE ends with speech.audio.error, the
WebSocket with an error frame, gRPC with its status; the log gets one line, no traceback."""

from __future__ import annotations

import json

import grpc
import httpx
import pytest

from tests.serving import start_server
from tests.ws_session import events, ws_session
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

SENTENCE = "The committee met again on Thursday to weigh every proposal on the table in detail."
LONG = " ".join([SENTENCE] * 40)


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("capped"), "--max-audio-seconds", "8")
    yield running
    running.stop()


def speech(server, timeout: float = 120, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=timeout)


def assert_no_traceback(server) -> None:
    log = server.log_path.read_text()
    assert "Traceback" not in log, log[-3000:]


def test_within_the_cap_nothing_changes(capped):
    response = speech(capped, input=SENTENCE, response_format="pcm")
    assert response.status_code == 200 and len(response.content) > 0


def test_a_whole_file_past_the_cap_is_a_413(capped):
    response = speech(capped, input=LONG, response_format="flac")
    assert response.status_code == 413, response.text[:300]
    error = response.json()["error"]
    assert error["reason"] == "AUDIO_TOO_LONG" and "8 s" in error["message"], error
    assert_no_traceback(capped)


def test_a_raw_stream_past_the_cap_ends_incomplete(capped):
    with httpx.stream("POST", f"{capped.http_url}/v1/audio/speech", json={"input": LONG, "response_format": "wav", "stream_format": "audio"}, timeout=120) as response:
        assert response.status_code == 200  # the header left with the first audio
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
    assert "audio response cut after its first bytes" in capped.log_path.read_text()
    assert_no_traceback(capped)
    assert speech(capped, input=SENTENCE, response_format="pcm").status_code == 200  # the gateway goes on


def test_sse_past_the_cap_ends_with_an_error_event(capped):
    with httpx.stream("POST", f"{capped.http_url}/v1/audio/speech", json={"input": LONG, "response_format": "pcm", "stream": True},
                      timeout=120) as response:
        data = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1]["type"] == "speech.audio.error" and data[-1]["error"]["reason"] == "AUDIO_TOO_LONG", data[-1]
    assert data[-1]["error"]["code"] == 413


def test_websocket_past_the_cap_gets_an_error_frame(capped):
    frames = ws_session(capped, {"response_format": "pcm", "stream_audio": True}, LONG, until=("session.done", "error"))
    (error,) = events(frames, "error")
    assert error["reason"] == "AUDIO_TOO_LONG" and error["code"] == 413, error


def test_grpc_past_the_cap_is_resource_exhausted(capped):
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM)
    with grpc.insecure_channel(capped.grpc_target) as channel:
        call = synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(
            iter([pb.SynthesizeRequest(config=config), pb.SynthesizeRequest(text=pb.TextInput(text=LONG))]), timeout=120
        )
        with pytest.raises(grpc.RpcError) as raised:
            list(call)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "--max-audio-seconds" in raised.value.details()


def test_a_deadline_after_the_first_byte_cuts_the_raw_stream_visibly(server):
    body = {"input": " ".join([SENTENCE] * 50), "response_format": "wav", "stream_format": "audio"}
    with httpx.stream("POST", f"{server.http_url}/v1/audio/speech", json=body, headers={"X-Request-Timeout": "4"}, timeout=60) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
    assert_no_traceback(server)


@pytest.mark.parametrize("response_format", ["flac", "wav"])
def test_a_deadline_on_a_whole_file_is_a_504(server, response_format):
    body = {"input": " ".join([SENTENCE] * 50), "response_format": response_format}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, headers={"X-Request-Timeout": "4"}, timeout=60)
    assert response.status_code == 504, response.text[:300]
