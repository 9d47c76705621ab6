"""Every word gets a time, those written with digits and symbols too ("$3.50", "7:45", "555-0123", "100%", a lone
"&"), on Piper (its own phoneme durations) and on a neural family timed by the forced aligner; a word that truly
cannot be timed is named in a WORD_NOT_TIMED warning with the reason, never dropped in silence."""

from __future__ import annotations

import httpx
import pytest

from tests.serving import start_server
from tests.stages.text.aligner.tiny_ctc import build_tiny_ctc
from tests.word_checks import assert_monotonic, assert_words_fit_text
from vocalis.clients.sync import Client
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

TEXT = ("It costs $3.50 at 7:45, so call 555-0123 before 2024 ends. "
        "About 1,234,567 people agree 100% & 12 of 50 said the score was 2-1 on the 22nd.")
SYMBOLIC = ["$3.50", "7:45", "555-0123", "2024", "1,234,567", "100%", "&", "12", "50", "2-1", "22nd"]


@pytest.fixture(scope="module")
def aligned(tmp_path_factory):
    root = tmp_path_factory.mktemp("aligned-symbols")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
    ctc = build_tiny_ctc(root / "tiny-ctc")
    running = start_server(root, "--family-module", "vocalis.stages.models._template.family", "--forced-aligner", str(ctc), str(checkpoint))
    yield running
    running.stop()


def words_and_warnings(server, text: str = TEXT, **fields) -> tuple[list[dict], list[pb.Warning]]:
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=True, **fields)
    with Client(server.grpc_target, timeout=120) as client:
        responses = list(client.stream(config, text))
    words = [
        {"word": w.word, "start_ms": w.start_ms, "end_ms": w.end_ms, "start_char": w.text_span.start, "end_char": w.text_span.end}
        for r in responses if r.WhichOneof("response") == "word_timings" for w in r.word_timings.words
    ]
    return words, [r.warning for r in responses if r.WhichOneof("response") == "warning"]


def timed_words(server, **fields) -> list[dict]:
    words, warnings = words_and_warnings(server, **fields)
    assert not [w for w in warnings if w.code == "WORD_NOT_TIMED"], warnings
    return words


def check(words: list[dict]) -> None:
    assert_words_fit_text(words, TEXT)  # every word of the text, in order, at its own offsets
    assert_monotonic(words)
    said = [w["word"] for w in words]
    for word in SYMBOLIC:
        assert word in said, (word, said)
    assert all(w["end_ms"] > w["start_ms"] for w in words if w["word"] in SYMBOLIC), words


def test_piper_times_every_word(server):
    check(timed_words(server))


def test_the_forced_aligner_times_every_word(aligned):
    check(timed_words(aligned, max_new_tokens=200))


def test_a_paragraph_of_1000_characters_gets_every_word_timed(aligned):
    paragraph = " ".join(["On May 3rd, 2024 at 9:30 the team of 12 shipped 1,500 units worth $42.99 each, 20% above plan."] * 11)
    assert len(paragraph) >= 1000
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=True, max_new_tokens=200)
    with Client(aligned.grpc_target, timeout=300) as client:
        responses = list(client.stream(config, paragraph))
    words = [
        {"word": w.word, "start_ms": w.start_ms, "end_ms": w.end_ms, "start_char": w.text_span.start, "end_char": w.text_span.end}
        for r in responses if r.WhichOneof("response") == "word_timings" for w in r.word_timings.words
    ]
    assert_words_fit_text(words, paragraph)
    assert_monotonic(words)


def test_a_word_the_aligner_cannot_time_is_named_with_the_reason(aligned):
    """The aligner's vocabulary has Latin letters only: a Cyrillic word gets no time, and the caller is told which
    word (its offsets in the session's text) and why, on gRPC and in the HTTP response's warning header."""
    text = "Hello there. Say Привет to the world."
    words, warnings = words_and_warnings(aligned, text, max_new_tokens=200)
    assert [w["word"] for w in words] == ["Hello", "there", "Say", "to", "the", "world"]
    untimed = [w for w in warnings if w.code == "WORD_NOT_TIMED"]
    assert len(untimed) == 1 and untimed[0].field == "word_timestamps", warnings
    assert text[17:23] == "Привет" and "'Привет' (characters 17-23)" in untimed[0].message, untimed[0].message
    assert "none of its characters is in the forced aligner's vocabulary" in untimed[0].message and untimed[0].message.startswith("1 word got no time")
    body = {"input": text, "word_timestamps": True, "response_format": "wav", "max_new_tokens": 200}
    response = httpx.post(f"{aligned.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    headers = [h for h in response.headers.get_list("X-Vocalis-Warning") if h.startswith("WORD_NOT_TIMED word_timestamps:")]
    assert len(headers) == 1 and "(characters 17-23)" in headers[0], response.headers
