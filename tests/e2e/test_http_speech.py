"""POST /v1/audio/speech end to end: formats, streaming, SSE, headers."""

from __future__ import annotations

import base64
import io
import json
import time

import av
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.audio_checks import assert_speech

DETERMINISTIC = {"extra_params": {"noise_scale": 0, "noise_w_scale": 0}}
THREE_SENTENCES = "The sun rose over the quiet hills. Birds began to sing in the tall trees. A new day had started."


@pytest.fixture(scope="module")
def http(server) -> httpx.Client:
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        yield client


def speech(http: httpx.Client, **body) -> httpx.Response:
    return http.post("/v1/audio/speech", json=body)


def decode(data: bytes, fmt: str) -> tuple[np.ndarray, int]:
    if fmt == "pcm":
        raise ValueError("pcm has no header")
    if fmt == "aac":
        with av.open(io.BytesIO(data)) as container:
            frames = [frame.to_ndarray() for frame in container.decode(audio=0)]
            rate = container.streams.audio[0].rate
        return np.concatenate(frames, axis=1)[0], rate
    samples, rate = sf.read(io.BytesIO(data), dtype="float32")
    return samples, rate


def test_hello_is_speech_at_22050(http):
    response = speech(http, model="en_US-joe-medium", input="Hello, how are you?", voice="en_US-joe-medium")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/wav"
    assert response.headers["x-sample-rate"] == "22050"
    with sf.SoundFile(io.BytesIO(response.content)) as wav:
        assert (wav.samplerate, wav.channels) == (22050, 1)
        samples = wav.read(dtype="float32")
    assert len(samples) / 22050 > 0.5
    assert_speech(samples, 22050)


def test_all_formats_decode_with_the_pcm_duration(http):
    text = "All six formats should carry the same speech."
    pcm = speech(http, input=text, response_format="pcm", **DETERMINISTIC)
    assert pcm.status_code == 200 and pcm.headers["content-type"] == "audio/pcm"
    pcm_seconds = len(pcm.content) / 2 / 22050
    expected_rates = {"wav": 22050, "flac": 22050, "mp3": 22050, "opus": 48000, "aac": 22050}
    for fmt, rate in expected_rates.items():
        response = speech(http, input=text, response_format=fmt, **DETERMINISTIC)
        assert response.status_code == 200, (fmt, response.text)
        assert response.headers["x-sample-rate"] == str(rate)
        samples, decoded_rate = decode(response.content, fmt)
        assert decoded_rate == rate, fmt
        assert abs(len(samples) / rate - pcm_seconds) <= 0.05 * pcm_seconds, (fmt, len(samples) / rate, pcm_seconds)
        assert_speech(samples, rate)


def test_sample_rate_is_resampled(http):
    response = speech(http, input="Resample me please.", response_format="wav", sample_rate=16000)
    assert response.status_code == 200, response.text
    samples, rate = decode(response.content, "wav")
    assert rate == 16000 and response.headers["x-sample-rate"] == "16000"
    assert_speech(samples, rate)


def test_streamed_pcm_equals_non_streamed(http):
    body = {"input": THREE_SENTENCES, "response_format": "pcm", **DETERMINISTIC}
    whole = speech(http, **body).content
    chunks = []
    with http.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "audio"}) as response:
        assert response.status_code == 200
        assert response.headers["x-sample-rate"] == "22050"
        chunks = list(response.iter_raw())
    assert len(chunks) > 1
    assert b"".join(chunks) == whole


def test_streamed_wav_has_a_header_then_pcm(http):
    body = {"input": "Streaming wav works.", **DETERMINISTIC}
    with http.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "audio", "response_format": "wav"}) as response:
        data = response.read()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    pcm = speech(http, **body, response_format="pcm").content
    assert data[44:] == pcm
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == 22050 and len(samples) == len(pcm) // 2


def test_sse_events_carry_the_audio(http):
    body = {"input": THREE_SENTENCES, "response_format": "pcm", **DETERMINISTIC}
    whole = speech(http, **body).content
    events = []
    with http.stream("POST", "/v1/audio/speech", json={**body, "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    names = [name for name, _ in events]
    assert names[-1] == "speech.audio.done" and set(names[:-1]) == {"speech.audio.delta"}
    assert all(data["type"] == name for name, data in events)
    audio = b"".join(base64.b64decode(data["audio"]) for name, data in events if name == "speech.audio.delta")
    assert audio == whole
    assert events[-1][1]["usage"]["output_tokens"] > 0


def test_speed_changes_duration(http):
    text = "Speed should change how long this takes."
    normal = len(speech(http, input=text, response_format="pcm", **DETERMINISTIC).content)
    fast = len(speech(http, input=text, response_format="pcm", speed=2.0, **DETERMINISTIC).content)
    slow = len(speech(http, input=text, response_format="pcm", speed=0.5, **DETERMINISTIC).content)
    # Durations are rounded up per phoneme, so twice the speed is a little over half the length.
    assert 0.45 * normal < fast < 0.75 * normal, (fast, normal)
    assert 1.6 * normal < slow < 2.2 * normal, (slow, normal)


def test_models_and_voices(http):
    models = http.get("/v1/models").json()
    assert models["object"] == "list"
    (model,) = models["data"]
    assert model["id"] == "en_US-joe-medium" and model["capabilities"]["sample_rate"] == 22050
    voices = http.get("/v1/audio/voices").json()
    assert voices["voices"] == ["en_US-joe-medium"]
    assert voices["voice_details"][0]["kind"] == "VOICE_KIND_PRESET"
    assert http.get("/health").json() == {"status": "healthy"}


def test_three_sentences_stream_before_the_last_is_synthesized(http):
    last = " ".join(["and the third sentence runs on for a long while so that it takes time to synthesize"] * 3)
    body = {"input": f"One short sentence. A second one. Then {last}.", "response_format": "pcm", "stream_format": "audio"}
    start = time.monotonic()
    arrivals = []
    with http.stream("POST", "/v1/audio/speech", json=body) as response:
        for _ in response.iter_raw():
            arrivals.append(time.monotonic() - start)
    assert len(arrivals) >= 3
    assert arrivals[0] < 0.5 * arrivals[-1], arrivals


def test_client_disconnect_cancels_the_work(http, server):
    body = {"input": " ".join(["A long text that keeps the voice busy for quite a while."] * 40), "response_format": "pcm", "stream_format": "audio"}
    with http.stream("POST", "/v1/audio/speech", json=body) as response:
        next(response.iter_raw())
    start = time.monotonic()
    after = speech(http, input="Right after.", response_format="pcm")
    assert after.status_code == 200
    # 40 sentences would keep the only worker busy for several seconds if they were not cancelled.
    assert time.monotonic() - start < 3.0
