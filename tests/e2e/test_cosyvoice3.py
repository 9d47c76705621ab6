"""CosyVoice3 served end to end on the tiny checkpoint (published layout, no config.json: detected by its file set):
HTTP (whole, raw stream, SSE), the WebSocket and gRPC, at 24 kHz, cloning from inline and uploaded voices.

Lengths are pinned: max_new_tokens 12 with a text whose minimum (2 speech tokens per text token) is above it, so no
stop token can come first; sampling is pinned with seed. Streams equal the whole file byte for byte: the flow stage's
lookahead covers what the DiT, the pre-lookahead conv and the vocoder read ahead.
"""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from tests.ws_session import ws_session
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

RATE = 24000
TOKEN = 960  # samples per 25 Hz speech token at 24 kHz
TOKENS = 12
TEXT = "Hello world, this is a tiny voice."
REF_TEXT = "a short prompt."


def clip_wav(seconds: float = 3.2, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    samples = 0.3 * np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 2 * t) + 0.02 * np.random.default_rng(0).standard_normal(len(t))
    buffer = io.BytesIO()
    sf.write(buffer, samples.astype(np.float32), rate, format="WAV")
    return buffer.getvalue()


CLIP = clip_wav()
REF = base64.b64encode(CLIP).decode()
PINNED = {"max_new_tokens": TOKENS, "seed": 5, "ref_audio": REF, "ref_text": REF_TEXT}


@pytest.fixture(scope="module")
def cosy(family_servers):
    return family_servers.get("cosyvoice3")  # shared with test_family_conformance.py (family_servers.py)


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": TEXT, **{**PINNED, **body}}, timeout=120)


def pcm(response: httpx.Response) -> bytes:
    assert response.status_code == 200, response.text
    return response.content


def test_http_wav_at_24k(cosy):
    response = speak(cosy)
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert response.headers["x-sample-rate"] == "24000" and rate == RATE
    assert len(samples) == TOKENS * TOKEN and 0.01 < samples.std() < 0.9


def config(**fields) -> pb.SessionConfig:
    ref_audio = fields.pop("ref_audio", None)
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **{k: v for k, v in fields.items() if k != "extra_params"})
    if ref_audio is not None:
        message.ref_audio = ref_audio
    return message


def test_grpc_streams_chunks_as_made_equal_to_the_whole(cosy):
    longer = {**PINNED, "max_new_tokens": 2 * TOKENS}  # still under the text's minimum of 26
    whole = pcm(speak(cosy, response_format="pcm", **longer))
    with Client(cosy.grpc_target, timeout=120) as client:
        responses = list(client.stream(config(**longer), TEXT))
    started = next(r.session_started for r in responses if r.WhichOneof("response") == "session_started")
    chunks = [r.audio for r in responses if r.WhichOneof("response") == "audio"]
    assert started.sample_rate == RATE
    assert len(chunks) >= 4 and chunks[0].num_samples == TOKEN  # the first chunk is one token (40 ms)
    assert sum(c.num_samples for c in chunks) == 2 * TOKENS * TOKEN
    assert b"".join(c.audio for c in chunks) == whole


def test_seed_decides_the_tokens(cosy):
    a, b = pcm(speak(cosy, response_format="pcm")), pcm(speak(cosy, response_format="pcm"))
    c = pcm(speak(cosy, response_format="pcm", seed=6))
    assert a == b and a != c and len(c) == len(a)


def test_standard_sampler_and_the_peers_data_uri(cosy):
    standard = pcm(speak(cosy, response_format="pcm", extra_params={"sampler": "standard"}))
    assert len(standard) == 2 * TOKENS * TOKEN and standard != pcm(speak(cosy, response_format="pcm"))
    data_uri = pcm(speak(cosy, response_format="pcm", ref_audio="data:audio/wav;base64," + REF))
    assert data_uri == pcm(speak(cosy, response_format="pcm"))


def test_uploaded_voice_clones_like_the_inline_clip(cosy):
    upload = httpx.post(f"{cosy.http_url}/v1/audio/voices", data={"name": "alice", "consent": "c-1", "ref_text": REF_TEXT},
                        files={"audio_sample": ("voice.wav", CLIP, "audio/wav")}, timeout=60)
    assert upload.status_code == 200, upload.text
    inline = pcm(speak(cosy, response_format="pcm"))
    body = {"input": TEXT, "max_new_tokens": TOKENS, "seed": 5, "voice": "alice", "response_format": "pcm"}
    first = pcm(httpx.post(f"{cosy.http_url}/v1/audio/speech", json=body, timeout=120))
    again = pcm(httpx.post(f"{cosy.http_url}/v1/audio/speech", json=body, timeout=120))
    # The store keeps the clip re-encoded, so its speech tokens may differ from the inline clip's in places.
    assert len(first) == len(inline) == 2 * TOKENS * TOKEN and first == again
    opening = np.frombuffer(first[:400], "<i2").astype(int) - np.frombuffer(inline[:400], "<i2")
    assert np.abs(opening).max() < 0.01 * 32768  # the same voice: the opening samples agree closely
    bare = httpx.post(f"{cosy.http_url}/v1/audio/voices", data={"name": "bob", "consent": "c-2"},
                      files={"audio_sample": ("voice.wav", CLIP, "audio/wav")}, timeout=60)
    assert bare.status_code == 200, bare.text
    response = httpx.post(f"{cosy.http_url}/v1/audio/speech", json={**body, "voice": "bob"}, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == "voice"


def test_the_peers_max_new_tokens_past_the_cache_is_a_cap(cosy):
    """The speech client's --max-new-tokens up to 4096 (the peer's bound) replaces the text-length budget, as at the
    peer; a bound of the cache length - 1 made it a 400. The cache ends the tokens, and the response says so."""
    samples = capped_audio(speak(cosy, max_new_tokens=PEER_MAX_NEW_TOKENS, response_format="wav"), RATE)
    assert len(samples) > len(pcm(speak(cosy, response_format="pcm"))) // 2  # more than the pinned 12 tokens


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"ref_audio": None, "ref_text": None}, "ref_audio", "CosyVoice3 requires 'ref_audio'"),
        ({"ref_text": None}, "ref_text", "CosyVoice3 requires 'ref_text'"),
        ({"extra_params": {"repetition_penalty": 1.1}}, "extra_params.repetition_penalty", "standard sampler"),
    ],
)
def test_bad_requests_are_400_naming_the_field(cosy, body, param, message):
    full = {"input": TEXT, **PINNED, **body}
    response = httpx.post(f"{cosy.http_url}/v1/audio/speech", json={k: v for k, v in full.items() if v is not None}, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and message in error["message"]
    assert speak(cosy).status_code == 200  # and the server keeps serving


def test_the_edge_policy_on_a_cloning_family(cosy):
    """docs/API.md: an unknown voice is 404 where the voice would come from its name, and ignored with a warning where
    the inline clip gives the voice; an undeclared extra_params key is ignored with a warning; the audio is unchanged."""
    plain = pcm(speak(cosy, response_format="pcm"))
    for body, field in (({"voice": "no-such-voice"}, "voice"), ({"extra_params": {"no_such_knob": 1}}, "extra_params.no_such_knob")):
        warned = speak(cosy, response_format="pcm", **body)
        assert [w.split(":")[0] for w in warned.headers.get_list("x-vocalis-warning")] == [f"FIELD_IGNORED {field}"]
        assert pcm(warned) == plain
    named = httpx.post(f"{cosy.http_url}/v1/audio/speech", json={"input": TEXT, "voice": "no-such-voice"}, timeout=60)
    assert named.status_code == 404 and named.json()["error"]["param"] == "voice", named.text


def test_the_peers_streaming_client_session(cosy):
    """The request shapes of vLLM-Omni's cosyvoice3/streaming_speech_client.py: a data-URI clip, split_granularity,
    stream_audio with pcm, and the text sent word by word (--simulate-stt)."""
    config = {"response_format": "pcm", "ref_audio": "data:audio/wav;base64," + REF, "ref_text": REF_TEXT,
              "split_granularity": "sentence", "stream_audio": True, "max_new_tokens": TOKENS, "seed": 5}
    words = TEXT.split(" ")
    pieces = [word + (" " if index < len(words) - 1 else "") for index, word in enumerate(words)]
    frames = ws_session(cosy, config, pieces, max_size=64 * 1024 * 1024)
    events = [f for f in frames if isinstance(f, dict)]
    start = next(e for e in events if e["type"] == "audio.start")
    assert start["sentence_index"] == 0 and start["sentence_text"].strip() == TEXT and start["sample_rate"] == RATE
    assert events[-1]["total_sentences"] == 1 and not any(e["type"] == "error" for e in events)
    assert b"".join(f for f in frames if isinstance(f, bytes)) == pcm(speak(cosy, response_format="pcm"))


def test_reference_length_is_warned_outside_3_to_10_s_and_refused_past_30_s(cosy):
    short = base64.b64encode(clip_wav(1.5)).decode()
    response = speak(cosy, response_format="pcm", ref_audio=short)
    assert response.status_code == 200, response.text
    assert "REFERENCE_LENGTH ref_audio" in response.headers.get("x-vocalis-warning", "") and "clones best from 3 to 10 s" in response.headers["x-vocalis-warning"]
    assert "x-vocalis-warning" not in speak(cosy, response_format="pcm").headers  # 3.2 s: nothing to say
    long = base64.b64encode(clip_wav(31, rate=8000)).decode()
    refused = speak(cosy, response_format="pcm", ref_audio=long)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "ref_audio"
    assert "30 s" in refused.json()["error"]["message"]  # the server's own limit is the tokenizer's


def test_a_requests_audio_does_not_depend_on_what_else_runs(cosy):
    from concurrent.futures import ThreadPoolExecutor

    alone = pcm(speak(cosy, response_format="pcm"))
    others = [{"seed": 20 + i, "input": "Hello world, this is a tiny voice. " * (i + 1)} for i in range(3)]
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(speak, cosy, response_format="pcm", **body) for body in others]
        target = pool.submit(speak, cosy, response_format="pcm")
        assert all(f.result().status_code == 200 for f in futures)
        assert pcm(target.result()) == alone
