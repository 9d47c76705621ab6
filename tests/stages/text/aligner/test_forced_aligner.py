"""The forced aligner: its CTC model against transformers, its Viterbi against brute force, its words and its thread."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.stages.text.aligner.tiny_ctc import build_tiny_ctc, golden_input
from tests.tolerance import rounding_bound, traced
from vocalis.stages.runtime.output import AudioOutput, WordTimes
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.text.aligner.aligner import NOT_IN_VOCABULARY, TOO_SHORT, AlignerWorker, ForcedAligner
from vocalis.stages.text.aligner.ctc import forced_align
from vocalis.stages.text.aligner.transcript import transcript
from vocalis.stages.text.word_times import UntimedWord

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "forced_aligner" / "goldens.npz"


@pytest.fixture(scope="module", params=["base", "large"])
def aligner(request, tmp_path_factory) -> ForcedAligner:
    torch.manual_seed(0)
    return ForcedAligner(build_tiny_ctc(tmp_path_factory.mktemp("ctc") / request.param, request.param))


def test_logits_match_transformers(aligner):
    variant = "large" if aligner.config.do_stable_layer_norm else "base"
    golden = np.load(GOLDENS)[f"{variant}_logits"]
    x = torch.from_numpy(golden_input())[None]
    x = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + 1e-7)
    with torch.inference_mode(), traced() as path:
        logits = aligner.model(x)[0].numpy()
    assert logits.shape == golden.shape
    assert np.abs(logits - golden).max() <= rounding_bound(torch.float32, path.peak, path.steps)


def test_a_checkpoint_missing_a_tensor_fails_naming_it(tmp_path):
    from safetensors.numpy import load_file, save_file

    path = build_tiny_ctc(tmp_path / "ctc")
    tensors = load_file(str(path / "model.safetensors"))
    del tensors["lm_head.bias"]
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(ValueError, match="lm_head.bias"):
        ForcedAligner(path)


def brute_force(log_probs: np.ndarray, tokens: list[int], blank: int) -> list[tuple[int, int]]:
    """Spans of each token on the best of every frame path that CTC-collapses to `tokens`."""
    best, best_path = -np.inf, None
    for path in itertools.product(range(log_probs.shape[1]), repeat=log_probs.shape[0]):
        collapsed = [k for k, _ in itertools.groupby(path) if k != blank]
        if collapsed != tokens:
            continue
        score = sum(log_probs[t, k] for t, k in enumerate(path))
        if score > best:
            best, best_path = score, path
    assert best_path is not None
    spans, index, previous = [], -1, blank
    for t, k in enumerate(best_path):
        if k != blank and k != previous:
            index += 1
            spans.append([t, t + 1])
        elif k != blank:
            spans[index][1] = t + 1
        previous = k
    return [tuple(s) for s in spans]


@pytest.mark.parametrize("case", range(40))
def test_viterbi_equals_brute_force(case):
    rng = np.random.default_rng(case)
    frames, vocab = int(rng.integers(3, 8)), 4
    tokens = [int(t) for t in rng.integers(1, vocab, size=int(rng.integers(1, 4)))]
    if case % 5 == 0 and len(tokens) > 1:
        tokens[1] = tokens[0]  # repeated tokens need a blank between them
    needed = len(tokens) + sum(a == b for a, b in zip(tokens, tokens[1:], strict=False))
    if frames < needed:
        frames = needed
    log_probs = np.log(rng.dirichlet(np.ones(vocab), size=frames))
    assert forced_align(log_probs, tokens, 0) == brute_force(log_probs, tokens, 0)


def test_too_few_frames_is_an_error():
    with pytest.raises(ValueError, match="cannot hold"):
        forced_align(np.zeros((2, 4)), [1, 1], 0)


def test_transcript_spells_in_the_vocabularys_case_and_skips_unspeakable_words():
    vocab = json.loads(json.dumps({c: i for i, c in enumerate(["<pad>", "|", "A", "B", "C", "'"])}))
    words = transcript("ab, 42 c'a!", vocab)
    assert words.tokens == [2, 3, 1, 4, 5, 2]
    assert [(w.text, first, end) for w, first, end in words.words] == [("ab", 0, 2), ("c'a", 3, 6)]
    assert [(w.text, w.start, w.end) for w in words.untimed] == [("42", 4, 6)]  # "forty two": no letter of this vocab


def test_words_are_placed_in_order_over_the_audio(aligner):
    text = "Hello there, 42 brave new world."
    audio = np.tile(golden_input(), 4)
    rate = 24000  # resampled to the aligner's 16 kHz
    aligned = aligner.align(audio, rate, text)
    words = aligned.words
    assert [w.word for w in words] == ["Hello", "there", "42", "brave", "new", "world"]  # 42 is spelled "forty two"
    assert aligned.untimed == []
    assert all(text[w.char_start : w.char_end] == w.word for w in words)
    assert all(0 <= w.start_sample < w.end_sample <= len(audio) for w in words)
    assert all(a.end_sample <= b.start_sample for a, b in zip(words, words[1:], strict=False))


def test_a_word_that_cannot_be_timed_is_listed_with_its_reason(aligner):
    audio = np.tile(golden_input(), 4)
    aligned = aligner.align(audio, 16000, "Hello Привет world")
    assert [w.word for w in aligned.words] == ["Hello", "world"]
    assert aligned.untimed == [UntimedWord("Привет", 6, 12, NOT_IN_VOCABULARY)]
    short = aligner.align(golden_input()[:200], 16000, "Hello Привет world")  # fewer frames than the text's tokens
    assert short.words == [] and [(w.word, w.reason) for w in short.untimed] == [
        ("Hello", TOO_SHORT), ("Привет", NOT_IN_VOCABULARY), ("world", TOO_SHORT)
    ]


def test_the_worker_sends_words_after_the_audio_then_ends_the_utterance(aligner):
    async def go() -> list:
        worker = AlignerWorker(aligner, 16000)
        request = SynthesisRequest(text="one two", stage_input=None, output=AudioOutput())
        worker.attach(request)
        request.emit(golden_input())
        request.emit(golden_input())
        request.finish()  # handed to the worker, which ends the output itself
        items = [item async for item in request.output]
        worker.close()
        return items

    items = asyncio.run(go())
    assert [type(i).__name__ for i in items] == ["ndarray", "ndarray", "WordTimes"]
    words = items[-1].words
    assert isinstance(items[-1], WordTimes) and [w.word for w in words] == ["one", "two"]
    assert words[-1].end_sample <= 2 * len(golden_input())


def pieces(audio: np.ndarray, size: int) -> list[np.ndarray]:
    return [audio[i : i + size] for i in range(0, len(audio), size)]


def test_a_short_unit_is_computed_in_one_pass_exactly(aligner):
    audio = golden_input()  # 0.25 s: shorter than a window and its right context
    windowed = aligner.windowed(16000)
    for piece in pieces(audio, 1000):
        windowed.feed(piece)
    assert windowed.frames_done == 0
    np.testing.assert_array_equal(windowed.finish(), aligner.log_probs(audio))


def test_a_long_unit_leaves_only_its_last_window_for_after_its_audio(aligner):
    rate = 24000
    audio = np.tile(golden_input(), 16)  # 4 s at 16 kHz, taken as 24 kHz audio: 2.7 s, resampled as it comes
    windowed = aligner.windowed(rate)
    for piece in pieces(audio, 2400):
        windowed.feed(piece)
    stride = int(np.prod(aligner.config.conv_stride))
    total = len(aligner.log_probs(__import__("soxr").resample(audio, rate, 16000)))
    assert total - windowed.frames_done <= windowed.window + windowed.context + 16000 * 0.1 / stride
    emissions = windowed.finish()
    assert emissions.shape == (total, aligner.config.vocab_size)
    words = aligner.align(audio, rate, "Hello there, brave new world.", emissions).words
    assert [w.word for w in words] == ["Hello", "there", "brave", "new", "world"]
    assert all(a.end_sample <= b.start_sample for a, b in zip(words, words[1:], strict=False))


def test_a_transcript_of_more_than_63_tokens_aligns():
    """The walk back once overflowed int8 past state 127: every unit of more than 63 tokens lost its words."""
    rng = np.random.default_rng(0)
    log_probs = np.log(rng.dirichlet(np.ones(30), size=800))
    tokens = [int(t) for t in rng.integers(1, 30, size=200)]
    spans = forced_align(log_probs, tokens, 0)
    assert len(spans) == 200 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
