"""CosyVoice3 served end to end on the tiny checkpoint (published layout, no config.json: detected by its file set):
HTTP (whole, raw stream, SSE), the WebSocket and gRPC, at 24 kHz, cloning from inline and uploaded voices.

Lengths are pinned: max_new_tokens 12 with a text whose minimum (2 speech tokens per text token) is above it, so no
stop token can come first; sampling is pinned with seed. Streams equal the whole file byte for byte: the flow stage's
lookahead covers what the DiT, the pre-lookahead conv and the vocoder read ahead.
"""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest

from tests.e2e.cosyvoice_line import (
    CLIP,
    RATE,
    REF,
    REF_TEXT,
    TEXT,
    TOKEN,
    TOKENS,
    check_audio_does_not_depend_on_what_else_runs,
    check_bad_request_is_400_naming_the_field,
    check_grpc_chunks_equal_the_whole,
    check_http_wav_at_24k,
    check_seed_decides_the_tokens,
    clip_wav,
    pcm,
    speak,
)
from tests.e2e.peer_bounds import PEER_MAX_NEW_TOKENS, capped_audio
from tests.serving import metric
from tests.ws_session import ws_session


@pytest.fixture(scope="module")
def cosy(family_servers):
    return family_servers.get("cosyvoice3")  # shared with test_family_conformance.py (family_servers.py)


def test_http_wav_at_24k(cosy):
    check_http_wav_at_24k(cosy)


def test_grpc_streams_chunks_as_made_equal_to_the_whole(cosy):
    check_grpc_chunks_equal_the_whole(cosy)


def test_seed_decides_the_tokens(cosy):
    check_seed_decides_the_tokens(cosy)


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


def test_a_voices_primed_prompt_and_encoding_are_counted_in_the_metrics(cosy):
    """The flow keeps a voice's primed prompt (deploy `prompt_cache_bytes`) and the voices stage the clip's encoding:
    the first request in a voice no request has used computes both (a miss each), the next starts from them (a hit
    each), and /metrics says so with what each cache holds."""

    def summed(stage: str, cache: str, *names: str) -> tuple[float, ...]:
        return tuple(sum(v for labels, v in metric(cosy, name).items() if f'stage="{stage}"' in labels and f'cache="{cache}"' in labels)
                     for name in names)

    def counts(stage: str, cache: str) -> tuple[float, ...]:
        return summed(stage, cache, "vocalis_stage_cache_hits_total", "vocalis_stage_cache_misses_total")

    def held(stage: str, cache: str) -> tuple[float, ...]:
        return summed(stage, cache, "vocalis_stage_cache_entries", "vocalis_stage_cache_bytes")

    caches = (("flow", "primed_voices"), ("voices", "references"))
    voice = base64.b64encode(clip_wav(seconds=2.9)).decode()  # a clip no other test sends
    before = {c: counts(*c) for c in caches}
    first = pcm(speak(cosy, response_format="pcm", ref_audio=voice))
    for c in caches:
        hits, misses = before[c]
        assert counts(*c) == (hits, misses + 1), c
        entries, nbytes = held(*c)
        assert entries >= 1 and nbytes > 0, c
    again = pcm(speak(cosy, response_format="pcm", ref_audio=voice))
    for c in caches:
        hits, misses = before[c]
        assert counts(*c) == (hits + 1, misses + 1), c
    assert again == first and len(first) == 2 * TOKENS * TOKEN


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
    check_bad_request_is_400_naming_the_field(cosy, body, param, message)


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
    check_audio_does_not_depend_on_what_else_runs(cosy, others=3)
