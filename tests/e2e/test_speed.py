"""`speed` works on every model: the encoder time-stretches, pitch kept, for models without a speed
of their own (Qwen3-TTS here, and a pure-tone family), streamed or not, over HTTP, gRPC and the WebSocket."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.gated_tts.family import RATE as TONE_RATE
from tests.gated_tts.family import write_checkpoint
from tests.serving import start_server
from tests.ws_session import ws_session
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

QWEN_RATE = 24000
GREEDY = {"temperature": 0, "subtalker_temperature": 0}
TEXT = "A sentence whose speed changes."
FRAMES = 40


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("qwen3-speed"), "tests/goldens/qwen3_tts/cv-0b6", timeout=120)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tones(tmp_path_factory):
    checkpoint = write_checkpoint(tmp_path_factory.mktemp("tones") / "tones", frequency=330.0)
    (checkpoint / "gate").touch()
    server = start_server(tmp_path_factory.mktemp("tones-logs"), str(checkpoint), "--family-module", "tests.gated_tts.family")
    yield server
    server.stop()


def http_pcm(server, how: str, **fields) -> np.ndarray:
    """Samples of one HTTP request: `file` (FLAC, a whole file), `raw` (PCM, chunked) or `sse` (base64 PCM events)."""
    url = f"{server.http_url}/v1/audio/speech"
    if how == "file":
        response = httpx.post(url, json={**fields, "response_format": "flac"}, timeout=120)
        assert response.status_code == 200, response.text
        return sf.read(io.BytesIO(response.content), dtype="float32")[0]
    body = {**fields, "response_format": "pcm"}
    if how == "raw":
        response = httpx.post(url, json={**body, "stream_format": "audio"}, timeout=120)
        assert response.status_code == 200, response.text
        return np.frombuffer(response.content, "<i2").astype(np.float32) / 32768
    audio = bytearray()
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                assert event["type"] != "speech.audio.error", event
                if event["type"] == "speech.audio.delta":
                    audio += base64.b64decode(event["audio"])
    return np.frombuffer(bytes(audio), "<i2").astype(np.float32) / 32768


def grpc_pcm(server, delivery: int, **fields) -> np.ndarray:
    extra = fields.pop("extra_params", None)
    text = fields.pop("text", TEXT)
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, delivery=delivery, **fields)
    if extra:
        config.extra_params.update(extra)
    with Client(server.grpc_target, timeout=120) as client:
        return np.frombuffer(client.synthesize(config, text).audio, "<i2").astype(np.float32) / 32768


HOW = ["http-file", "http-raw", "http-sse", "grpc-file", "grpc-stream", "ws-stream", "ws-file"]


def ws_pcm(server, stream_audio: bool, text: str, **fields) -> np.ndarray:
    """Every sentence's audio over the WebSocket: binary PCM frames as made, or one WAV file per sentence."""
    config = {"response_format": "pcm" if stream_audio else "wav", "stream_audio": stream_audio, **fields}
    frames = ws_session(server, config, text, timeout=60, refuse_errors=True)
    pieces = [frame for frame in frames if isinstance(frame, bytes)]
    if stream_audio:
        return np.frombuffer(b"".join(pieces), "<i2").astype(np.float32) / 32768
    return np.concatenate([sf.read(io.BytesIO(piece), dtype="float32")[0] for piece in pieces])


def synthesize(server, how: str, **fields) -> np.ndarray:
    if how.startswith("ws-"):
        text = fields.pop("input", None) or fields.pop("text", TEXT)
        return ws_pcm(server, how == "ws-stream", text, **fields)
    if how.startswith("http-"):
        return http_pcm(server, how.removeprefix("http-"), **fields)
    delivery = pb.AUDIO_DELIVERY_FILE if how == "grpc-file" else pb.AUDIO_DELIVERY_STREAM
    return grpc_pcm(server, delivery, **fields)


def test_every_model_reports_speed(qwen, tones):
    for server in (qwen, tones):
        with Client(server.grpc_target, timeout=60) as client:
            (model,) = client.list_models()
            assert "speed" in model.capabilities.accepted_fields and "speed" not in model.capabilities.rejected_fields
            assert (model.capabilities.limits.min_speed, model.capabilities.limits.max_speed) == (0.25, 4.0)


@pytest.mark.parametrize("how", HOW)
def test_qwen3_tts_speed_scales_the_duration(qwen, how):
    fields = {"input": TEXT, "voice": "Vivian", "max_new_tokens": FRAMES, "extra_params": GREEDY}
    if how.startswith(("grpc-", "ws-")):
        fields = {"voice": "Vivian", "max_new_tokens": FRAMES, "extra_params": GREEDY}
    normal = synthesize(qwen, how, **fields)
    assert len(normal) / QWEN_RATE > 0.5
    for speed in (0.5, 2.0):
        changed = synthesize(qwen, how, speed=speed, **fields)
        ratio = len(changed) / len(normal)
        assert abs(ratio - 1 / speed) <= 0.05 / speed, (speed, ratio)


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


@pytest.mark.parametrize("how", HOW)
def test_speed_keeps_the_pitch(tones, how):
    text = "One tone. Two tones."
    fields = {"input": text} if how.startswith(("http-", "ws-")) else {"text": text}
    normal = synthesize(tones, how, **fields)
    assert abs(dominant_hz(normal, TONE_RATE) - 330) < 3
    for speed in (0.5, 2.0):
        changed = synthesize(tones, how, speed=speed, **fields)
        assert abs(len(changed) / len(normal) - 1 / speed) <= 0.05 / speed
        assert abs(dominant_hz(changed, TONE_RATE) - 330) < 3
