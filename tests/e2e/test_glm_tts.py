"""GLM-TTS served end to end on the tiny checkpoint (published layout, no top-level config.json: detected by its
file set): HTTP (whole, raw stream, SSE), the WebSocket and gRPC, at 24 kHz, cloning from inline and uploaded voices;
and the exact request bodies of vLLM-Omni's GLM-TTS example clients.

Lengths are pinned: max_new_tokens with a text whose minimum (2 speech tokens per text token) is at or above it, so
no stop token can come first; sampling is pinned with seed. Every protocol's audio comes through the same chunked
flow stage (4-token chunks, 8 of lookahead), so streams equal the whole file byte for byte; how far chunk ends are
from a one-pass decode of the utterance is bounded in tests/stages/models/glm_tts/test_flow_vocoder.py.
"""

from __future__ import annotations

import base64
import io
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.e2e.cosyvoice_line import (
    CLIP,
    RATE,
    REF_TEXT,
    TEXT,
    TOKEN,
    TOKENS,
    check_audio_does_not_depend_on_what_else_runs,
    check_bad_request_is_400_naming_the_field,
    check_grpc_chunks_equal_the_whole,
    check_http_wav_at_24k,
    check_seed_decides_the_tokens,
    pcm,
    speak,
)


@pytest.fixture(scope="module")
def glm(family_servers):
    return family_servers.get("glm-tts")  # shared with test_family_conformance.py (family_servers.py)


@pytest.fixture(scope="module")
def glm_root(glm):
    """The server's --ref-audio-dir, holding ref.wav for ref_audio as a file:// URI, as vLLM-Omni's GLM-TTS client documents it."""
    root = glm.log_path.parent
    (root / "ref.wav").write_bytes(CLIP)
    return root


def test_detected_by_its_file_set_and_http_wav_at_24k(glm):
    models = httpx.get(f"{glm.http_url}/v1/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == ["glm-tts-tiny", "glm-tts"]
    check_http_wav_at_24k(glm)


def test_grpc_streams_chunks_equal_to_the_whole(glm):
    check_grpc_chunks_equal_the_whole(glm)


def test_seed_decides_the_tokens(glm):
    check_seed_decides_the_tokens(glm)


def test_uploaded_voice_caches_its_prompt_and_clones(glm):
    upload = httpx.post(f"{glm.http_url}/v1/audio/voices", data={"name": "alice", "consent": "c-1", "ref_text": REF_TEXT},
                        files={"audio_sample": ("voice.wav", CLIP, "audio/wav")}, timeout=60)
    assert upload.status_code == 200, upload.text
    body = {"input": TEXT, "max_new_tokens": TOKENS, "seed": 5, "voice": "alice", "response_format": "pcm"}
    first = pcm(httpx.post(f"{glm.http_url}/v1/audio/speech", json=body, timeout=120))
    again = pcm(httpx.post(f"{glm.http_url}/v1/audio/speech", json=body, timeout=120))
    assert len(first) == 2 * TOKENS * TOKEN and first == again
    bare = httpx.post(f"{glm.http_url}/v1/audio/voices", data={"name": "bob", "consent": "c-2"},
                      files={"audio_sample": ("voice.wav", CLIP, "audio/wav")}, timeout=60)
    assert bare.status_code == 200, bare.text
    response = httpx.post(f"{glm.http_url}/v1/audio/speech", json={**body, "voice": "bob"}, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == "voice"
    assert "ref_text" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"ref_audio": None, "ref_text": None}, "ref_audio", "GLM-TTS requires 'ref_audio' (reference audio for voice cloning)"),
        ({"ref_audio": None}, "ref_audio", "GLM-TTS requires 'ref_audio'"),
        ({"ref_text": None}, "ref_text", "GLM-TTS requires 'ref_text' (transcript of the reference audio)"),
        ({"extra_params": {"sampler": "topk", "win_size": 4}}, "extra_params.win_size", "ras sampler only"),
    ],
)
def test_bad_requests_are_400_naming_the_field(glm, body, param, message):
    check_bad_request_is_400_naming_the_field(glm, body, param, message)


def test_a_requests_audio_does_not_depend_on_what_else_runs(glm):
    check_audio_does_not_depend_on_what_else_runs(glm, others=2)
    assert speak(glm, extra_params={"sampler": "topk"}).status_code == 200  # the published alternative sampler serves too


# vLLM-Omni's GLM-TTS clients (examples/online_serving/text_to_speech/glm_tts/ in its repository, newer than the
# 0.30.0 wheel): openai_speech_client.py (its default and documented invocations) and gradio_demo.py (whole and
# streamed). Neither opens the WebSocket. They send no seed, so lengths are bounds: the text-length budget.
PEER_TEXT = "Hi."
PEER_TEXT_TOKENS = 3  # ids of PEER_TEXT in the tiny tokenizer: 2 to 20 speech tokens each
JSON_HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer EMPTY"}


def gradio_reference() -> str:
    """The demo's ref_audio: the uploaded clip as 16-bit WAV in a base64 data URL."""
    samples, rate = sf.read(io.BytesIO(CLIP), dtype="int16")
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode()


def peer_bodies(ref_path) -> dict[str, dict]:
    client = {"model": "glm-tts", "voice": "default", "input": PEER_TEXT, "response_format": "wav", "stream": False,
              "ref_audio": ref_path.as_uri(), "ref_text": REF_TEXT}
    demo = {"input": PEER_TEXT, "voice": "default", "response_format": "wav", "stream": False, "max_new_tokens": 4096,
            "ref_audio": gradio_reference(), "ref_text": REF_TEXT}
    return {
        "client": client,
        "client --response-format mp3": {**client, "response_format": "mp3"},
        "client --stream": {**client, "stream": True},
        "demo": demo,
        "demo streamed": {**demo, "response_format": "pcm", "stream": True, "stream_format": "audio"},
    }


def peer_audio(server, body: dict) -> tuple[np.ndarray, int]:
    """What the client gets: the response read as the client reads it (SSE deltas joined), decoded."""
    with httpx.stream("POST", f"{server.http_url}/v1/audio/speech", json=body, headers=JSON_HEADERS, timeout=120) as response:
        content = response.read()
        assert response.status_code == 200, content
        kind = response.headers["content-type"]
    if body.get("stream_format") == "audio":
        return np.frombuffer(content, dtype="<i2").astype(np.float32) / 32768, RATE
    if body["stream"]:
        assert kind.startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in content.decode().splitlines() if line.startswith("data: ")]
        assert events[-1]["type"] == "speech.audio.done"
        content = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    return sf.read(io.BytesIO(content), dtype="float32")


def test_vllm_omni_glm_tts_client_requests(glm, glm_root):
    bodies = peer_bodies(glm_root / "ref.wav")
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = dict(zip(bodies, pool.map(lambda body: peer_audio(glm, body), bodies.values()), strict=True))
    low, high = 2 * PEER_TEXT_TOKENS * TOKEN, 20 * PEER_TEXT_TOKENS * TOKEN
    for name, (samples, rate) in answers.items():
        assert rate == RATE, name
        assert 0.01 < samples.std() < 0.9, name
        if name.endswith("mp3"):  # the encoder pads and trims frames
            assert low - 2 * 1152 <= len(samples) <= high + 2 * 1152, name
        else:
            assert low <= len(samples) <= high and len(samples) % TOKEN == 0, (name, len(samples))
