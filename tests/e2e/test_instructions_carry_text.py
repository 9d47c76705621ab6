"""An empty `input` whose `instructions` hold the content: taken where the family declares it (AuK,
Capabilities.instructions_carry_text), refused with EMPTY_INPUT where the family needs text (Piper).

The AuK bodies are the shapes vLLM-Omni's AuK example client sends: `"input": ""` with the whole instruction in
`instructions`, for text-only generation (told a duration), editing a clip (`ref_audio`), and `--stream`
(`stream: true` with `response_format: "pcm"`, answered as server-sent events; and the raw stream).
"""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.serving import start_server

CHECKPOINT = "tests/goldens/auk/tiny"
RATE, HOP = 24000, 480
FAST = {"num_inference_steps": 2}
INSTRUCTION = 'Say the following with a calm female voice: "Hello there."'


@pytest.fixture(scope="module")
def auk(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("auk-empty-input"), CHECKPOINT, timeout=180)
    yield running
    running.stop()


def post(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=180)


def clip(seconds: float) -> str:
    t = np.arange(int(RATE * seconds)) / RATE
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), RATE, format="WAV", subtype="PCM_16")
    return base64.b64encode(buffer.getvalue()).decode()


def test_instruct_with_empty_input(auk):
    body = {"instructions": INSTRUCTION, "duration_seconds": 0.2, "seed": 3, "extra_params": FAST}
    response = post(auk, input="", **body)
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == RATE and len(samples) == 10 * HOP and np.abs(samples).max() > 0.01
    assert response.content == post(auk, input="x", **body).content  # the input took no part either way


def test_edit_with_empty_input(auk):
    response = post(auk, input="", instructions="Make the speech louder.", ref_audio=clip(1.0), extra_params=FAST)
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == RATE and len(samples) == 50 * HOP


def test_stream_with_empty_input(auk):
    body = {"input": "", "instructions": INSTRUCTION, "duration_seconds": 0.2, "seed": 3, "extra_params": FAST, "response_format": "pcm"}
    with httpx.stream("POST", f"{auk.http_url}/v1/audio/speech", json={**body, "stream": True}, timeout=180) as response:
        assert response.status_code == 200
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    sse = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert len(sse) == 10 * HOP * 2
    with httpx.stream("POST", f"{auk.http_url}/v1/audio/speech", json={**body, "stream_format": "audio"}, timeout=180) as response:
        assert response.status_code == 200
        assert response.read() == sse


@pytest.mark.parametrize("instructions", [None, "   "])
def test_neither_input_nor_instructions_is_refused(auk, instructions):
    body = {"input": " ", "duration_seconds": 0.2, "extra_params": FAST}
    if instructions is not None:
        body["instructions"] = instructions
    response = post(auk, **body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["reason"] == "EMPTY_INPUT" and error["param"] == "input", error


def test_a_family_that_needs_text_refuses_empty_input(server):
    response = post(server, input="")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["reason"] == "EMPTY_INPUT" and error["param"] == "input", error
