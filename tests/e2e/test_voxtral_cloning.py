"""Voxtral TTS cloning end to end, on a checkpoint that has the audio tokenizer's encoder (none is published; the
open one refuses ref_audio, tests/e2e/test_voxtral.py): inline ref_audio, an uploaded voice, and a preset beside
ref_audio (the preset wins, as the peer)."""

from __future__ import annotations

import base64
import io
import json
import os

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.goldens.voxtral.build_tiny import build
from tests.serving import start_server

MODEL = "voxtral-full"
FRAMES, FRAME = 6, 1920
PINNED = {"model": MODEL, "input": "Hello world, this is a cloned voice.", "max_new_tokens": FRAMES, "seed": 3, "response_format": "pcm"}


def clip() -> bytes:
    t = np.arange(16000) / 16000
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(5 * t))).astype(np.float32), 16000, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def vox(tmp_path_factory):
    root = tmp_path_factory.mktemp("voxtral-full")
    checkpoint = build(root / MODEL, encoder=True)
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        running = start_server(root, str(checkpoint), "--stage-overrides", json.dumps({"frame_generator": {"max_len": 64}}), timeout=180)
    finally:
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = threads
    yield running
    running.stop()


def speak(server, **body) -> np.ndarray:
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={**PINNED, **body}, timeout=120)
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def test_inline_uploaded_and_preset_beside_a_reference(vox):
    reference = "data:audio/wav;base64," + base64.b64encode(clip()).decode()
    cloned = speak(vox, ref_audio=reference)
    assert len(cloned) == FRAMES * FRAME and cloned.std() > 100
    preset = speak(vox, voice="casual_male")
    assert not np.array_equal(cloned, preset)
    both = httpx.post(f"{vox.http_url}/v1/audio/speech", json={**PINNED, "voice": "casual_male", "ref_audio": reference}, timeout=120)
    assert np.array_equal(np.frombuffer(both.content, dtype="<i2"), preset)  # the preset wins, as the peer's
    assert both.headers["x-vocalis-warning"].startswith("FIELD_IGNORED ref_audio: ref_audio ignored: the preset voice 'casual_male'")

    upload = httpx.post(f"{vox.http_url}/v1/audio/voices", data={"name": "alice", "consent": "c-1"},
                        files={"audio_sample": ("voice.wav", clip(), "audio/wav")}, timeout=60)
    assert upload.status_code == 200, upload.text
    assert np.array_equal(speak(vox, voice="alice"), cloned)  # the same clip, stored: the same voice
    with httpx.Client() as client:
        model = client.get(f"{vox.http_url}/v1/models", timeout=30).json()["data"][0]
    assert MODEL in model["id"]
