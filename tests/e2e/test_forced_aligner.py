"""The forced-aligner stage end to end: a neural family (the tiny test TTS) gets word times from a tiny CTC model."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serving import start_server
from tests.stages.text.aligner.tiny_ctc import build_tiny_ctc
from tests.word_checks import assert_monotonic, assert_words_fit_text
from vocalis.clients.sync import Client
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb


@pytest.fixture(scope="module")
def aligned(tmp_path_factory):
    root = tmp_path_factory.mktemp("aligned-server")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)  # no EOS: lengths follow max_new_tokens
    ctc = build_tiny_ctc(root / "tiny-ctc")
    running = start_server(root, "--family-module", "vocalis.stages.models._template.family", "--forced-aligner", str(ctc), str(checkpoint))
    yield running
    running.stop()


def config(**fields) -> pb.SessionConfig:
    return pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=True, max_new_tokens=40, **fields)


def test_a_session_with_three_flushes_gets_offsets_into_the_whole_text(aligned):
    pieces = ["alpha beta, ", "gamma delta", " epsilon zeta", " eta theta"]
    with Client(aligned.grpc_target, timeout=120) as client, client.session(config()) as session:
        for number, piece in enumerate(pieces):
            session.send(piece)
            if number < 3:
                session.flush(f"f{number}")
        session.end()
        responses = list(session)
    text = "".join(pieces)
    kinds = [r.WhichOneof("response") for r in responses]
    words, audio_ms, utterance_ends = [], 0.0, []
    for response in responses:
        kind = response.WhichOneof("response")
        if kind == "audio":
            audio_ms += response.audio.num_samples / 16.0
        elif kind == "word_timings":
            words += [{"word": w.word, "start_ms": w.start_ms, "end_ms": w.end_ms, "start_char": w.text_span.start,
                       "end_char": w.text_span.end} for w in response.word_timings.words]
            assert all(w.end_ms <= audio_ms + 1 for w in response.word_timings.words)
        elif kind == "utterance_done":
            utterance_ends.append(audio_ms)
    assert kinds.count("word_timings") == 4 and kinds.count("flush_done") == 3
    assert_words_fit_text(words, text)
    assert_monotonic(words)
    for index, end in enumerate(utterance_ends):  # each unit's words lie within its own audio
        timings = [r.word_timings for r in responses if r.WhichOneof("response") == "word_timings"][index]
        start = utterance_ends[index - 1] if index else 0.0
        assert all(start - 1 <= w.start_ms and w.end_ms <= end + 1 for w in timings.words)


def test_http_header_and_capabilities(aligned):
    body = {"input": "one small step", "word_timestamps": True, "max_new_tokens": 30}
    response = httpx.post(f"{aligned.http_url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200, response.text
    words = json.loads(response.headers["x-word-timestamps"])
    assert [w["word"] for w in words] == ["one", "small", "step"]
    with Client(aligned.grpc_target, timeout=30) as client:
        assert "word_timestamps" in client.list_models()[0].capabilities.accepted_fields
