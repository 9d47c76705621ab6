"""A long first sentence does not hold back the first audio: on every protocol the default (auto) split makes the
first unit the sentence's first clause, and the audio still has every word, in order, at Piper's 22050 Hz."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.audio_checks import assert_speech
from tests.word_checks import assert_cover_speech, assert_monotonic, assert_words_fit_text
from tests.ws_session import events, ws_session
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}
"""Piper without noise: the same text gives the same samples on every protocol."""
FIRST_CLAUSE = "The lighthouse stood on a rock at the edge of the bay,"
FIRST_SENTENCE = (
    FIRST_CLAUSE + " and for more than a hundred years its keeper had climbed the same spiral stairs every evening to light the lamp."
)
TEXT = FIRST_SENTENCE + " The last keeper was a patient woman named Ruth, who kept a notebook of every ship she saw pass."
RATE = 22050


def pcm_samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768


@pytest.fixture(scope="module")
def sse(server) -> tuple[list[dict], bytes]:
    """The SSE stream's words, each with its unit (utterance_index), and its PCM."""
    body = {"input": TEXT, "stream": True, "response_format": "pcm", "word_timestamps": True, "extra_params": NOISELESS}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    events_ = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    words = [{**w, "unit": e["utterance_index"]} for e in events_ if e["type"] == "speech.audio.timestamps" for w in e["words"]]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events_ if e["type"] == "speech.audio.delta")
    return words, pcm


def test_sse_first_unit_is_the_first_clause_and_every_word_is_spoken(sse):
    words, pcm = sse
    first = [w for w in words if w["unit"] == 0]
    assert " ".join(w["word"] for w in first) == FIRST_CLAUSE.rstrip(",")
    plain = [{k: v for k, v in w.items() if k != "unit"} for w in words]
    assert_words_fit_text(plain, TEXT)  # no word dropped or repeated at the new boundary
    assert_monotonic(plain)
    samples = pcm_samples(pcm)
    assert_speech(samples, RATE)
    assert_cover_speech(plain, samples, RATE)
    lamp = next(w for w in plain if w["word"] == "lamp")
    assert first[-1]["end_ms"] < 0.5 * lamp["end_ms"], "the first unit's audio is not much shorter than the first sentence's"


def test_raw_stream_and_file_have_the_same_audio(server, sse):
    words, pcm = sse
    body = {"input": TEXT, "response_format": "pcm", "stream_format": "audio", "extra_params": NOISELESS}
    raw = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert raw.status_code == 200 and raw.headers["x-sample-rate"] == str(RATE)
    assert raw.content == pcm  # the same units, hence the same samples, as the SSE stream
    body = {"input": TEXT, "response_format": "wav", "word_timestamps": True, "extra_params": NOISELESS}
    wav = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert wav.status_code == 200, wav.text
    samples, rate = sf.read(io.BytesIO(wav.content), dtype="int16")
    assert rate == RATE and samples.tobytes() == pcm
    assert json.loads(wav.headers["x-word-timestamps"]) == [{k: v for k, v in w.items() if k != "unit"} for w in words]


def test_websocket_first_sentence_event_is_the_first_clause(server, sse):
    frames = ws_session(server, {"response_format": "pcm", "stream_audio": True, "extra_params": NOISELESS}, TEXT, refuse_errors=True)
    starts = events(frames, "audio.start")
    assert starts[0]["sentence_text"] == FIRST_CLAUSE
    assert " ".join(s["sentence_text"] for s in starts) == TEXT
    assert b"".join(f for f in frames if isinstance(f, bytes)) == sse[1]


@pytest.mark.parametrize(
    ("granularity", "first"),
    [(pb.SPLIT_GRANULARITY_UNSPECIFIED, FIRST_CLAUSE), (pb.SPLIT_GRANULARITY_SENTENCE, FIRST_SENTENCE)],
)
def test_grpc_first_unit_unless_sentences_are_asked_for(server, granularity, first):
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, text_splitting=pb.TextSplitting(granularity=granularity))
    config.extra_params.update(NOISELESS)
    with Client(server.grpc_target, timeout=120) as client:
        done = [r.utterance_done for r in client.stream(config, TEXT) if r.WhichOneof("response") == "utterance_done"]
    assert TEXT[done[0].text_span.start : done[0].text_span.end] == first
