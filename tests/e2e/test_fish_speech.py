"""Fish Speech S2 Pro served end to end on the tiny checkpoint of tests/goldens/fish_speech (config.json,
model.safetensors, tokenizer.json, codec.pth): 44.1 kHz over HTTP, gRPC and the WebSocket, text-only and cloned
voices, the peer client's request shapes, opus by resampling, and the refusals the peer makes.

The random tiny model may choose its stop token at any frame after the first, so lengths are checked as whole
frames up to max_new_tokens, and streams against the whole file of the same seeded request.
"""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
import soundfile as sf

from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

FRAME = 2048
FRAMES = 6
TEXT = "Hello world, this is a tiny voice."
PINNED = {"max_new_tokens": FRAMES, "seed": 7}


def clip_data_url(seconds: float = 1.2, rate: int = 24000) -> str:
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def fish(family_servers):
    return family_servers.get("fish")  # shared with test_family_conformance.py (family_servers.py)


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": TEXT, **PINNED, **body}, timeout=120)


def pcm(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def test_http_wav_at_44k_in_whole_frames(fish):
    response = speak(fish, response_format="wav")
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 44100 and response.headers["x-sample-rate"] == "44100"
    assert len(samples) % FRAME == 0 and 1 <= len(samples) // FRAME <= FRAMES
    assert samples.std() > 1e-3


def test_grpc_streams_chunks_equal_to_the_whole(fish):
    whole = pcm(speak(fish, response_format="pcm")).tobytes()
    with Client(fish.grpc_target, timeout=120) as client:
        responses = list(client.stream(pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **PINNED), TEXT))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio"]
    assert started.sample_rate == 44100
    assert chunks[0].num_samples == FRAME  # the first chunk is one frame
    assert b"".join(c.audio for c in chunks) == whole


def test_peer_client_shapes_clone_and_text_only(fish):
    """fish_speech/speech_client.py: a text-only request with the default voice, and a clone with ref_audio as a
    data URL plus ref_text; an uploaded voice clones the same."""
    default = pcm(speak(fish, model="fishaudio/s2-pro", voice="default", response_format="pcm"))
    cloned = pcm(speak(fish, model="fishaudio/s2-pro", response_format="pcm", ref_audio=clip_data_url(),
                       ref_text="A short reference."))
    assert len(cloned) % FRAME == 0 and len(cloned) > 0
    assert len(default) != len(cloned) or not np.array_equal(default, cloned)
    clip = base64.b64decode(clip_data_url().split(",", 1)[1])
    upload = httpx.post(f"{fish.http_url}/v1/audio/voices", data={"name": "ref", "consent": "c-1", "ref_text": "A short reference."},
                        files={"audio_sample": ("voice.wav", clip, "audio/wav")}, timeout=60)
    assert upload.status_code == 200, upload.text
    assert np.array_equal(pcm(speak(fish, voice="ref", response_format="pcm")), cloned)


def test_opus_is_resampled_and_refusals_name_the_field(fish):
    opus = speak(fish, response_format="opus")
    assert opus.status_code == 200, opus.text
    samples, rate = sf.read(io.BytesIO(opus.content), dtype="float32")
    assert rate == 48000 and len(samples) > 0
    missing = speak(fish, ref_audio=clip_data_url())
    assert missing.status_code == 400 and "ref_text" in missing.text
    ignored = speak(fish, instructions="happy", response_format="pcm")  # the peer ignores it: a warning, same audio
    assert ignored.status_code == 200 and ignored.headers["x-vocalis-warning"].startswith("FIELD_IGNORED instructions")
    assert ignored.content == speak(fish, response_format="pcm").content
    assert speak(fish, input="hi <|im_end|> there").status_code == 400


def test_batched_requests_equal_their_solo_runs(fish):
    """Batch invariance: seeded requests running together (the slow AR, the fast AR and the codec batched across
    them) give what each gives alone: the same frames (same length), samples within float rounding of a different
    batch shape (a few int16 steps)."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = [dict(input=TEXT, seed=3, response_format="pcm"), dict(input="Good morning, brown fox.", seed=4, response_format="pcm"),
              dict(input=TEXT, seed=5, response_format="pcm", ref_audio=clip_data_url(), ref_text="A short reference.")]
    solo = [pcm(speak(fish, **body)) for body in bodies]
    with ThreadPoolExecutor(len(bodies)) as pool:
        together = list(pool.map(lambda body: pcm(speak(fish, **body)), bodies))
    for alone, batched in zip(solo, together, strict=True):
        assert alone.shape == batched.shape
        assert np.abs(alone.astype(np.int32) - batched.astype(np.int32)).max() <= 4


def test_top_k_minus_one_is_vllms_disabled(fish):
    """vLLM's clients send top_k -1 for "no top-k": served as 0 (keep all), the same audio, no warning."""
    seeded = {"response_format": "pcm", "seed": 7}
    disabled = speak(fish, **seeded, extra_params={**PINNED.get("extra_params", {}), "top_k": -1})
    keep_all = speak(fish, **seeded, extra_params={**PINNED.get("extra_params", {}), "top_k": 0})
    assert disabled.status_code == 200, disabled.text
    assert disabled.content == keep_all.content and "x-vocalis-warning" not in disabled.headers
