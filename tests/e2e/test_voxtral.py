"""Voxtral TTS served end to end: a tiny Mistral-format checkpoint (params.json, consolidated.safetensors, tekken.json,
voice_embedding/) over HTTP, SSE, the WebSocket and gRPC at 24 kHz, including the peer gradio demo's request shapes
(a preset picked by its display name; a reference upload, which the open checkpoint cannot clone: a 400).

The tiny semantic head never picks [END_AUDIO] (build_tiny zeroes its row), so lengths are max_new_tokens frames.
"""

from __future__ import annotations

import base64
import io
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from tests.ws_session import events, ws_session
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

MODEL = "mistralai/Voxtral-4B-TTS-2603"
FRAME = 1920
FRAMES = 8
TEXT = "Hello world, this is a tiny voice."
PINNED = {"voice": "neutral_female", "max_new_tokens": FRAMES, "seed": 7}


@pytest.fixture(scope="module")
def vox(family_servers):
    return family_servers.get("voxtral")  # shared with test_family_conformance.py (family_servers.py)


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"model": MODEL, "input": TEXT, **PINNED, **body}, timeout=120)


def pcm(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def test_gradio_demo_preset_by_display_name(vox):
    """The demo's payload exactly: input, model, response_format wav, voice as its dropdown shows it."""
    response = httpx.post(f"{vox.http_url}/v1/audio/speech", timeout=120,
                          json={"input": TEXT, "model": MODEL, "response_format": "wav", "voice": "Neutral_Male"})
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 24000 and response.headers["x-sample-rate"] == "24000"
    assert len(samples) > 0 and len(samples) % FRAME == 0 and samples.std() > 0.01  # max_len 48 caps the frames


def test_gradio_demo_reference_upload_is_a_400(vox):
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(np.arange(24000) / 24000 * 2 * np.pi * 180)).astype(np.float32), 24000, format="WAV")
    clip = "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode()
    response = httpx.post(f"{vox.http_url}/v1/audio/speech", timeout=120,
                          json={"input": TEXT, "model": MODEL, "response_format": "wav", "ref_audio": clip})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "ref_audio" and "requires the full Voxtral checkpoint with encoder weights" in error["message"]
    assert speak(vox).status_code == 200  # the server keeps serving


def test_voice_or_ref_audio_is_required(vox):
    response = httpx.post(f"{vox.http_url}/v1/audio/speech", json={"model": MODEL, "input": TEXT}, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "voice"
    assert "Either 'voice' (preset speaker) or 'ref_audio' (voice cloning) must be provided" in response.json()["error"]["message"]


def test_grpc_and_websocket_say_a_voice_is_required(vox):
    with Client(vox.grpc_target, timeout=60) as client:
        with pytest.raises(VocalisError) as caught:
            client.synthesize(pb.SessionConfig(model=MODEL, encoding=audio_pb2.AUDIO_ENCODING_PCM), TEXT)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT and "'voice' (preset speaker)" in caught.value.message
    (error,) = events(ws_session(vox, {"model": MODEL, "response_format": "pcm"}, TEXT, timeout=60, until=("error",)), "error")
    assert "'voice' (preset speaker)" in error["message"]


def test_unknown_voice_and_bad_fields_are_refused_by_name(vox):
    unknown = speak(vox, voice="nobody")
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "voice"
    assert "neutral_female" in unknown.json()["error"]["message"]
    for body, param in (({"max_new_tokens": 0}, "max_new_tokens"), ({"max_new_tokens": 4097}, "max_new_tokens")):
        response = speak(vox, **body)
        assert response.status_code == 400 and response.json()["error"]["param"] == param, (body, response.text)
    undeclared = speak(vox, extra_params={"temperature": 0.5})  # a key Voxtral does not declare: rule 2 (docs/API.md)
    assert undeclared.status_code == 200, undeclared.text
    assert [w.split(":")[0] for w in undeclared.headers.get_list("x-vocalis-warning")] == ["FIELD_IGNORED extra_params.temperature"]


@pytest.mark.parametrize("max_new_tokens", [48, PEER_MAX_NEW_TOKENS])  # 48: refused before, as max_len - 1 was the bound
def test_the_peers_max_new_tokens_past_the_cache_is_a_cap(vox, max_new_tokens):
    """Up to 4096 as the peer takes it (its demos send 4096); the 48-position cache ends the frames, and says so."""
    samples = capped_audio(speak(vox, max_new_tokens=max_new_tokens, response_format="wav"), 24000)
    assert len(samples) % FRAME == 0 and FRAMES * FRAME < len(samples) < 48 * FRAME


def test_fields_the_peer_ignores_pass_with_a_warning_and_speed_stretches(vox):
    response = speak(vox, response_format="pcm", instructions="whisper", language="French")
    assert len(pcm(response)) == FRAMES * FRAME
    warnings = response.headers.get_list("x-vocalis-warning")
    assert any(w.startswith("FIELD_IGNORED instructions") for w in warnings), warnings
    faster = pcm(speak(vox, response_format="pcm", speed=2.0))
    assert abs(len(faster) - FRAMES * FRAME // 2) <= FRAME // 4


def test_presets_listed_lower_cased_by_http_and_grpc(vox):
    listed = httpx.get(f"{vox.http_url}/v1/audio/voices", timeout=30).json()["voices"]
    assert {"casual_male", "neutral_female", "neutral_male", "fr_female"} <= set(listed)
    with Client(vox.grpc_target, timeout=30) as client:
        model = client.get_model(MODEL)
    assert list(model.capabilities.voices) == ["casual_male", "neutral_female", "neutral_male", "fr_female"]
    assert model.capabilities.sample_rate == 24000


def test_wav_length_seed_and_cfg(vox):
    first = pcm(speak(vox, response_format="pcm"))
    assert len(first) == FRAMES * FRAME
    assert np.array_equal(first, pcm(speak(vox, response_format="pcm")))
    assert not np.array_equal(first, pcm(speak(vox, response_format="pcm", seed=8)))
    assert not np.array_equal(first, pcm(speak(vox, response_format="pcm", extra_params={"cfg_alpha": 2.0})))
    assert not np.array_equal(first, pcm(speak(vox, response_format="pcm", voice="casual_male")))


def test_grpc_streams_chunks_equal_to_the_whole(vox):
    whole = pcm(speak(vox, response_format="pcm")).tobytes()
    message = pb.SessionConfig(model=MODEL, voice="neutral_female", encoding=audio_pb2.AUDIO_ENCODING_PCM, seed=7, max_new_tokens=FRAMES)
    with Client(vox.grpc_target, timeout=120) as client:
        responses = list(client.stream(message, TEXT))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio"]
    assert started.sample_rate == 24000
    assert [c.num_samples for c in chunks] == [5 * FRAME, 3 * FRAME]  # 5 frames first (the peer's), then the rest
    assert b"".join(c.audio for c in chunks) == whole


def test_batch_invariance(vox):
    """A request's audio does not depend on what else runs with it (continuous batching, both stages): the codes are
    the same (tests/stages/models/voxtral checks them exactly); batched decodes differ by float rounding at most."""
    bodies = [{"voice": "neutral_female", "seed": 7}, {"voice": "casual_male", "seed": 3, "max_new_tokens": 6},
              {"voice": "fr_female", "seed": 5, "input": "Another sentence entirely."}]
    alone = [pcm(speak(vox, response_format="pcm", **body)) for body in bodies]
    with ThreadPoolExecutor(len(bodies)) as pool:
        together = list(pool.map(lambda body: pcm(speak(vox, response_format="pcm", **body)), bodies))
    for one, other in zip(alone, together, strict=True):
        assert one.shape == other.shape and np.abs(one.astype(int) - other.astype(int)).max() <= 2
