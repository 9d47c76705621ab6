"""Qwen3-TTS served end to end from the tiny checkpoints: CustomVoice, VoiceDesign and Base cloning over HTTP
and gRPC, streaming and not, and the errors that name the field at fault."""

from __future__ import annotations

import base64
import io

import grpc
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

RATE = 24000
HOP = 1920
MAX_LEN = 128
"""The talker's cache (4096 as deployed): the peer's max_new_tokens 4096 ends where it does."""
GREEDY = {"temperature": 0, "subtalker_temperature": 0}


@pytest.fixture(scope="module")
def custom_voice(family_servers):
    return family_servers.get("qwen3-cv")  # shared with test_family_conformance.py (family_servers.py)


@pytest.fixture(scope="module")
def voice_design(family_servers):
    return family_servers.get("qwen3-vd")  # shared with test_family_conformance.py (family_servers.py)


@pytest.fixture(scope="module")
def base(family_servers):
    return family_servers.get("qwen3-base")  # shared with test_family_conformance.py (family_servers.py)


def speech(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=120)


def config(**fields) -> pb.SessionConfig:
    extra = fields.pop("extra_params", GREEDY)
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **fields)
    message.extra_params.update(extra)
    return message


def clip_wav() -> bytes:
    t = np.arange(RATE * 2) / RATE
    samples = 0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    buffer = io.BytesIO()
    sf.write(buffer, samples.astype(np.float32), RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def chunk_split(total: int, first: int = 1, size: int = 25) -> list[int]:
    """Frames per chunk of a `total`-frame stream under the deploy's policy: `first`, then chunks of `size`."""
    sizes = [min(first, total)]
    while sum(sizes) < total:
        sizes.append(min(size, total - sum(sizes)))
    return sizes


def chunk_frames(server, cfg: pb.SessionConfig, text: str) -> tuple[list[int], bytes]:
    with Client(server.grpc_target, timeout=120) as client:
        chunks = [r.audio for r in client.stream(cfg, text) if r.WhichOneof("response") == "audio"]
    return [c.num_samples // HOP for c in chunks], b"".join(c.audio for c in chunks)


def test_custom_voice_over_http(custom_voice):
    response = speech(custom_voice, input="Hello there.", voice="Vivian", language="English", max_new_tokens=12,
                      instructions="Speak warmly.", extra_params=GREEDY)
    assert response.status_code == 200, response.text
    assert response.headers["x-sample-rate"] == str(RATE)
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == RATE and len(samples) % HOP == 0 and 0 < len(samples) <= 12 * HOP and samples.std() > 0.01


def test_the_peers_max_new_tokens_past_the_cache_is_a_cap(custom_voice):
    """4096, the peer's bound (its talker's max_model_len too): the adapter took it, then the talker refused a prompt
    plus 4096 over its cache. Now the cache ends the frames, as vLLM's engine does, and the response says so."""
    response = speech(custom_voice, input="Hello there.", voice="Vivian", max_new_tokens=PEER_MAX_NEW_TOKENS, extra_params=GREEDY)
    samples = capped_audio(response, RATE)
    assert len(samples) % HOP == 0 and len(samples) < MAX_LEN * HOP


LONG = " ".join("abcdefghij"[i % 10] for i in range(140))
"""One unit (no sentence mark, under the splitter's 300 characters) of 140 words: more than the 128-position cache."""


@pytest.mark.parametrize("non_streaming", [True, False])
def test_a_prompt_past_the_cache_is_400_prompt_too_long(custom_voice, non_streaming):
    """The runtime's rule, as for every family, in both of the talker's layouts: the whole text in the prompt, or fed
    in as frames are generated (which, before, reached no check and was cut short silently)."""
    response = speech(custom_voice, input=LONG, voice="Vivian", extra_params={**GREEDY, "non_streaming_mode": non_streaming})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["reason"] == "PROMPT_TOO_LONG" and error["code"] == 400 and error["param"] == "input", error
    assert f"cache holds {MAX_LEN}" in error["message"], error
    assert speech(custom_voice, input="Hello there.", voice="Vivian", max_new_tokens=4, extra_params=GREEDY).status_code == 200


def test_grpc_streams_one_frame_then_chunks_of_25_and_equals_the_file(custom_voice):
    frames, streamed = chunk_frames(custom_voice, config(voice="ryan", max_new_tokens=30), "A longer sentence, streamed in chunks.")
    assert sum(frames) >= 2 and frames == chunk_split(sum(frames))  # EOS may come early: the split follows from the total
    whole = config(voice="ryan", max_new_tokens=30, delivery=pb.AUDIO_DELIVERY_FILE)
    with Client(custom_voice.grpc_target, timeout=120) as client:
        assert client.synthesize(whole, "A longer sentence, streamed in chunks.").audio == streamed


def test_initial_chunk_per_request_and_seeded_sampling(custom_voice):
    frames, _ = chunk_frames(custom_voice, config(voice="ryan", max_new_tokens=12, initial_codec_chunk_frames=4), "Four first.")
    assert sum(frames) >= 2 and frames == chunk_split(sum(frames), first=4)
    sampled = {"temperature": 0.9, "top_k": 20, "subtalker_temperature": 0.8}
    with Client(custom_voice.grpc_target, timeout=120) as client:
        a = client.synthesize(config(voice="eric", seed=7, max_new_tokens=10, extra_params=sampled), "Seeded.").audio
        b = client.synthesize(config(voice="eric", seed=7, max_new_tokens=10, extra_params=sampled), "Seeded.").audio
        c = client.synthesize(config(voice="eric", seed=8, max_new_tokens=10, extra_params=sampled), "Seeded.").audio
    assert a == b and a != c


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"task_type": "Base"}, 400, "task_type"),
        ({"speaker_embedding": [0.1, 0.2]}, 400, "speaker_embedding"),
        ({"x_vector_only_mode": True}, 400, "x_vector_only_mode"),
    ],
)
def test_custom_voice_errors_name_the_field(custom_voice, body, status, param):
    response = speech(custom_voice, input="Hi.", **body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == param


def test_an_undeclared_extra_params_key_is_served_with_a_warning(custom_voice):
    response = speech(custom_voice, input="Hi.", max_new_tokens=4, extra_params={"num_step": 2})
    assert response.status_code == 200, response.text
    assert [w.split(":")[0] for w in response.headers.get_list("x-vocalis-warning")] == ["FIELD_IGNORED extra_params.num_step"]


def test_voice_design(voice_design):
    response = speech(voice_design, input="Designed.", instructions="A deep, husky voice.", max_new_tokens=8, extra_params=GREEDY)
    assert response.status_code == 200, response.text
    missing = speech(voice_design, input="Designed.")
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "instructions"
    frames, audio = chunk_frames(voice_design, config(instructions="Bright and fast.", max_new_tokens=10), "Streamed design.")
    assert frames[0] == 1 and len(audio) == sum(frames) * HOP * 2


def test_base_cloning_icl_and_x_vector(base):
    reference = base64.b64encode(clip_wav()).decode()
    icl = speech(base, input="Cloned voice.", ref_audio=reference, ref_text="A two second clip.", max_new_tokens=10, extra_params=GREEDY)
    assert icl.status_code == 200, icl.text
    samples, rate = sf.read(io.BytesIO(icl.content))
    assert rate == RATE and 0 < len(samples) <= 10 * HOP  # the reference clip's own audio is not in the output
    xvec = speech(base, input="Cloned voice.", ref_audio=reference, x_vector_only_mode=True, max_new_tokens=10, extra_params=GREEDY)
    assert xvec.status_code == 200, xvec.text
    embedded = speech(base, input="Given embedding.", speaker_embedding=[0.1] * 32, max_new_tokens=6, extra_params=GREEDY)
    assert embedded.status_code == 200, embedded.text
    frames, _ = chunk_frames(base, config(ref_audio=reference, ref_text="A two second clip.", max_new_tokens=8), "Streamed clone.")
    assert frames[0] == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"ref_audio": "REF"}, "ref_text"),
        ({}, "ref_audio"),
        ({"speaker_embedding": [0.1] * 5}, "speaker_embedding"),
        ({"ref_audio": "REF", "ref_text": "x", "task_type": "CustomVoice"}, "task_type"),
    ],
)
def test_base_errors_name_the_field(base, body, param):
    body = {k: base64.b64encode(clip_wav()).decode() if v == "REF" else v for k, v in body.items()}
    response = speech(base, input="Hi.", **body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_grpc_error_for_a_missing_transcript(base):
    with Client(base.grpc_target, timeout=60) as client:
        with pytest.raises(VocalisError) as caught:
            client.synthesize(config(ref_audio=base64.b64encode(clip_wav()).decode()), "No transcript.")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT and "ref_text" in caught.value.message
