"""VoxCPM2 served end to end: the tiny golden checkpoint over HTTP, gRPC and WebSocket at 48 kHz.

The built-in family loads the checkpoint directory as published (config.json with only an
`architecture`). Lengths are pinned with max_new_tokens and extra_params.min_len (the random stop
head would end utterances at random); noise is pinned with seed.
"""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from tests.goldens.voxcpm2.cases import HERE
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

PATCH = 2 * 1920  # samples per patch of the tiny checkpoint at 48 kHz
PATCHES = 8
MAX_LEN = 56
"""The generator's cache (4096 as deployed): the peer's max_new_tokens 4096 ends where it does."""
PINNED = {"max_new_tokens": PATCHES, "seed": 11, "extra_params": {"min_len": PATCHES}}


@pytest.fixture(scope="module")
def vox(family_servers):
    return family_servers.get("voxcpm2")  # shared with test_family_conformance.py (family_servers.py)


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hello world, this is a tiny voice.", **PINNED, **body}, timeout=60)


def wav(response: httpx.Response) -> tuple[np.ndarray, int]:
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    return samples, rate


def pcm(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def config(**fields) -> pb.SessionConfig:
    extra = fields.pop("extra_params", None)
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **fields)
    if extra:
        message.extra_params.update(extra)
    return message


def test_http_wav_at_48k(vox):
    response = speak(vox)
    samples, rate = wav(response)
    assert response.headers["x-sample-rate"] == "48000" and rate == 48000
    assert len(samples) == PATCHES * PATCH and 0.01 < samples.std() < 0.5


def test_grpc_streams_patch_sized_chunks_equal_to_the_whole(vox):
    whole = pcm(speak(vox, response_format="pcm")).tobytes()
    with Client(vox.grpc_target, timeout=60) as client:
        responses = list(client.stream(config(**PINNED), "Hello world, this is a tiny voice."))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio"]
    assert started.sample_rate == 48000
    assert [c.num_samples for c in chunks] == [PATCH] + [2 * PATCH] * 3 + [PATCH]
    assert b"".join(c.audio for c in chunks) == whole


def test_opus_at_48k_and_a_resampled_24k_request(vox):
    opus = speak(vox, response_format="opus")
    samples, rate = wav(opus)
    assert rate == 48000 and opus.headers["x-sample-rate"] == "48000"
    assert abs(len(samples) - PATCHES * PATCH) < 0.05 * PATCHES * PATCH
    resampled = speak(vox, response_format="wav", sample_rate=24000)
    samples, rate = wav(resampled)
    assert rate == 24000 and resampled.headers["x-sample-rate"] == "24000"
    assert abs(len(samples) - PATCHES * PATCH // 2) <= 2 and samples.std() > 0.01


def test_cloning_inline_uploaded_and_precomputed(vox):
    default = pcm(speak(vox, response_format="pcm"))
    clip = (HERE / "ref.wav").read_bytes()
    reference = pcm(speak(vox, response_format="pcm", ref_audio=base64.b64encode(clip).decode()))
    continuation = pcm(speak(vox, response_format="pcm", ref_audio=base64.b64encode(clip).decode(), ref_text="a short prompt."))
    assert len(reference) == len(continuation) == len(default) == PATCHES * PATCH
    assert not np.array_equal(reference, default) and not np.array_equal(continuation, reference)

    upload = httpx.post(
        f"{vox.http_url}/v1/audio/voices", data={"name": "alice", "consent": "c-1", "ref_text": "a short prompt."},
        files={"audio_sample": ("voice.wav", clip, "audio/wav")}, timeout=60,
    )
    assert upload.status_code == 200, upload.text
    assert np.array_equal(pcm(speak(vox, response_format="pcm", voice="alice")), continuation)  # same clip and transcript
    narrator = pcm(speak(vox, response_format="pcm", voice="narrator"))
    assert len(narrator) == PATCHES * PATCH and not np.array_equal(narrator, default)
    isolated = pcm(speak(vox, response_format="pcm", voice="narrator", extra_params={"min_len": PATCHES, "clone_mode": "reference"}))
    assert not np.array_equal(isolated, narrator)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"speed": 5.0}, "speed"),  # any speed from 0.25 to 4 is the encoder's time-stretch
        ({"ref_text": "no audio"}, "ref_text"),
    ],
)
def test_unhonoured_fields_are_refused_by_name(vox, body, param):
    response = speak(vox, **body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_an_undeclared_extra_params_key_is_ignored_with_a_warning(vox):
    response = speak(vox, extra_params={**PINNED["extra_params"], "temperature": 0.5})
    assert response.status_code == 200, response.text
    assert [w.split(":")[0] for w in response.headers.get_list("x-vocalis-warning")] == ["FIELD_IGNORED extra_params.temperature"]


def test_speed_one_passes_and_instructions_are_ignored_with_a_warning(vox):
    response = speak(vox, speed=1.0, instructions="whisper", language="Auto")
    assert response.status_code == 200, response.text
    assert response.headers.get_list("x-vocalis-warning") == ["FIELD_IGNORED instructions: instructions ignored: model voxcpm2-tiny does not use it"]


def test_the_peers_max_new_tokens_past_the_cache_is_a_cap(vox):
    """4096, the peer's bound, was a 400 (the bound was the cache length - 1); min_len 4096 keeps the stop head off, so
    the cache alone ends the patches, and the response says so."""
    samples = capped_audio(speak(vox, max_new_tokens=PEER_MAX_NEW_TOKENS, extra_params={"min_len": PEER_MAX_NEW_TOKENS}), 48000)
    prompt = MAX_LEN - len(samples) // PATCH
    assert len(samples) % PATCH == 0 and 0 < prompt < 32, prompt  # every position the text prompt leaves
