"""Every word gets a time, those written with digits and symbols too ("$3.50", "7:45", "555-0123", "100%", a lone
"&"), on Piper (its own phoneme durations) and on a neural family timed by the forced aligner."""

from __future__ import annotations

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


def timed_words(server, **fields) -> list[dict]:
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, word_timestamps=True, **fields)
    with Client(server.grpc_target, timeout=120) as client:
        responses = list(client.stream(config, TEXT))
    return [
        {"word": w.word, "start_ms": w.start_ms, "end_ms": w.end_ms, "start_char": w.text_span.start, "end_char": w.text_span.end}
        for r in responses if r.WhichOneof("response") == "word_timings" for w in r.word_timings.words
    ]


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
