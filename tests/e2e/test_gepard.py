"""Gepard-1.0 served end to end: the tiny checkpoint (tests/tiny_gepard) over HTTP, gRPC and WebSocket at 22.05 kHz.

The checkpoint's config.json says `qwen3_5_text`; the server picks Gepard by its gepard_config.json sidecar. The
tiny codec makes 16 samples per frame; lengths are pinned with max_new_tokens (the tiny stop head rarely fires) and
sampling with seed.
"""

from __future__ import annotations

import io
import json

import grpc
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.e2e.family_servers import ONE_THREAD
from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from tests.serving import start_server
from tests.tiny_gepard.build import build_checkpoint
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

FRAME = 16
FRAMES = 24
MAX_LEN = 96
"""The talker's cache (4096 as deployed): the peer's max_new_tokens 4096 ends where it does."""
PINNED = {"max_new_tokens": FRAMES, "seed": 5}
TEXT = "hello world the quick brown fox"


@pytest.fixture(scope="module")
def gepard(family_servers):
    return family_servers.get("gepard")  # shared with test_family_conformance.py (family_servers.py)


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": TEXT, **PINNED, **body}, timeout=60)


def pcm(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def test_http_wav_at_22050_of_the_pinned_length(gepard):
    response = speak(gepard)
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 22050 and response.headers["x-sample-rate"] == "22050"
    assert len(samples) == FRAMES * FRAME and 0.01 < samples.std() < 0.9
    again = pcm(speak(gepard, response_format="pcm"))
    assert np.array_equal(again, pcm(speak(gepard, response_format="pcm")))  # seeded: the same audio
    assert not np.array_equal(again, pcm(speak(gepard, response_format="pcm", seed=6)))


def test_the_peers_max_new_tokens_past_the_cache_is_a_cap(gepard):
    """4096 frames, the peer's bound: with the prompt it overfilled the cache (a scheduler error); now the cache (or
    the stop head) ends the frames, and the response says where the cap is."""
    samples = capped_audio(speak(gepard, max_new_tokens=PEER_MAX_NEW_TOKENS), 22050)
    assert len(samples) % FRAME == 0 and len(samples) < MAX_LEN * FRAME


def test_grpc_streams_chunks_that_join_to_the_whole(gepard):
    whole = pcm(speak(gepard, response_format="pcm")).tobytes()
    with Client(gepard.grpc_target, timeout=60) as client:
        responses = list(client.stream(pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **PINNED), TEXT))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio"]
    assert started.sample_rate == 22050
    assert len(chunks) > 2 and chunks[0].num_samples == 4 * FRAME
    assert b"".join(c.audio for c in chunks) == whole  # streamed with left context == one whole decode


def test_a_backbone_of_full_attention_only_serves(tmp_path):
    """The published backbone has no linear-attention layer (its vendor's model guide: 14 full-attention layers); such a
    checkpoint failed to load (the talker asked its decoder for a recurrent-state shape it does not have). Served here
    over HTTP: 22.05 kHz audio of the pinned length."""
    checkpoint = build_checkpoint(tmp_path / "gepard-full-attention", full_attention_only=True)
    server = start_server(tmp_path, "--stage-overrides", json.dumps({"gepard": {"max_len": 96}}), str(checkpoint), env=ONE_THREAD)
    try:
        response = speak(server)
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 22050 and len(samples) == FRAMES * FRAME and 0.01 < samples.std() < 0.9


def test_opus_is_resampled(gepard):
    response = speak(gepard, response_format="opus")
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate in (24000, 48000) and len(samples) > 0


def test_only_the_default_voice(gepard):
    """Gepard speaks one voice: another name is an unknown voice, 404 / NOT_FOUND with reason UNKNOWN_VOICE, as on every
    family (docs/API.md, the edge policy; the peer answers 400 here, we answer as for any other family)."""
    response = speak(gepard, voice="alice")
    assert response.status_code == 404 and response.json()["error"]["param"] == "voice"
    assert "'alice'" in response.json()["error"]["message"]
    with Client(gepard.grpc_target, timeout=60) as client:
        with pytest.raises(VocalisError) as caught:
            client.synthesize(pb.SessionConfig(voice="Alice", encoding=audio_pb2.AUDIO_ENCODING_PCM, **PINNED), TEXT)
    assert caught.value.code == grpc.StatusCode.NOT_FOUND and caught.value.reason == "UNKNOWN_VOICE"
    assert np.array_equal(pcm(speak(gepard, voice="default", response_format="pcm")), pcm(speak(gepard, response_format="pcm")))


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 4097}, "max_new_tokens"),
        ({"max_new_tokens": 1_000_000}, "max_new_tokens"),
    ],
)
def test_bad_fields_are_400_by_name(gepard, body, param):
    response = speak(gepard, **body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert speak(gepard).status_code == 200  # the server keeps serving


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"extra_params": {"no_such_knob": 1}}, "extra_params.no_such_knob"),
        ({"instructions": "Speak softly."}, "instructions"),
        ({"language": "xx-notalanguage"}, "language"),
        ({"task_type": "Base"}, "task_type"),
    ],
)
def test_what_gepard_does_not_use_is_served_with_a_warning(gepard, body, field):
    """The edge policy (docs/API.md): rule 2 of the field policy, the audio unchanged (Gepard declares no extra params,
    takes no instructions or task, and does not select languages)."""
    warned = speak(gepard, response_format="pcm", **body)
    assert [w.split(":")[0] for w in warned.headers.get_list("x-vocalis-warning")] == [f"FIELD_IGNORED {field}"]
    assert np.array_equal(pcm(warned), pcm(speak(gepard, response_format="pcm")))
