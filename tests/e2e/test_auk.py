"""AuK served end to end from the tiny checkpoint over HTTP, gRPC and the WebSocket: text-only generation told its
duration, editing a source clip (duration from the clip), the request-field rules of the peer's adapter, seeds."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.ws_session import audio as ws_audio
from tests.ws_session import events, ws_session
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

RATE = 24000
HOP = 480
FAST = {"num_inference_steps": 2}
INSTRUCTION = 'Say the following with a calm female voice: "Hello there."'


@pytest.fixture(scope="module")
def auk(family_servers):
    return family_servers.get("auk")  # shared with test_family_conformance.py (family_servers.py)


def speech(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"extra_params": FAST, **body}, timeout=180)


def clip(seconds: float) -> bytes:
    t = np.arange(int(RATE * seconds)) / RATE
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def warnings(response: httpx.Response) -> list[str]:
    return response.headers.get_list("x-vocalis-warning")


def test_text_only_is_24khz_and_as_long_as_asked(auk):
    response = speech(auk, input="ignored words", instructions=INSTRUCTION, duration_seconds=0.2, seed=3)
    assert response.status_code == 200, response.text
    assert response.headers["x-sample-rate"] == str(RATE)
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == RATE and len(samples) == 10 * HOP and np.abs(samples).max() > 0.01
    assert any("input" in w and "not used" in w for w in warnings(response))


def test_input_alone_is_the_instruction_with_a_warning(auk):
    response = speech(auk, input=INSTRUCTION, duration_seconds=0.1, seed=3)
    assert response.status_code == 200, response.text
    assert any("instructions" in w for w in warnings(response))
    plain = speech(auk, input="other", instructions=INSTRUCTION, duration_seconds=0.1, seed=3)
    assert plain.content == response.content  # the same instruction either way


def test_task_type_wraps_the_input(auk):
    wrapped = speech(auk, input="Hello there.", task_type="CustomVoice", duration_seconds=0.1, seed=3)
    spelled = speech(auk, input='Say the following: "Hello there."', duration_seconds=0.1, seed=3)
    assert wrapped.status_code == 200 and wrapped.content == spelled.content


def test_editing_a_clip_keeps_its_length_and_warns_about_ref_text(auk):
    reference = base64.b64encode(clip(1.0)).decode()
    response = speech(auk, input="x", instructions="Make the speech louder.", ref_audio=reference, ref_text="unused")
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == RATE and len(samples) == 50 * HOP
    assert any("ref_text ignored" in w for w in warnings(response))


def test_seed_reproduces(auk):
    a, b, c = (speech(auk, input=INSTRUCTION, duration_seconds=0.1, seed=s).content for s in (5, 5, 6))
    assert a == b and a != c


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "duration_seconds"),
        ({"duration_seconds": 31}, "duration_seconds"),
        ({"duration_seconds": 0}, "duration_seconds"),
        ({"duration_seconds": 1, "extra_params": {"t_grid": [0, 0.5, 0.5, 1]}}, "extra_params.t_grid"),
    ],
)
def test_bad_fields_are_refused_by_name(auk, body, field):
    response = httpx.post(f"{auk.http_url}/v1/audio/speech", json={"input": INSTRUCTION, **body}, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field, error


def test_grpc_streams_the_decode_in_chunks_and_announces_the_rate(auk):
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, duration_seconds=0.4, instructions=INSTRUCTION, seed=1)
    config.extra_params.update({"t_grid": [0.0, 0.5, 1.0]})
    with Client(auk.grpc_target, timeout=180) as client:
        responses = list(client.stream(config, "two sentences. Not split."))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio" and r.audio.num_samples]
    dones = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert started.sample_rate == RATE and len(dones) == 1  # the whole input is one unit
    assert len(chunks) >= 2 and chunks[0].num_samples == 10 * HOP  # the first chunk leaves before the rest is decoded
    assert sum(c.num_samples for c in chunks) == 20 * HOP


def test_websocket_session(auk):
    config = {"response_format": "pcm", "stream_audio": True, "extra_params": FAST, "duration_seconds": 0.2, "instructions": INSTRUCTION}
    frames = ws_session(auk, config, "First. Second.", timeout=180, refuse_errors=True)
    audio, done = ws_audio(frames), events(frames, "audio.done")
    assert len(done) == 1 and len(audio) == 10 * HOP * 2
