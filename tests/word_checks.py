"""Checks shared by the word-timestamp tests: order, offsets, and that the times cover the speech."""

from __future__ import annotations

import numpy as np

from vocalis.stages.text.word_times import text_words


def assert_words_fit_text(words: list[dict], text: str) -> None:
    """Each word's offsets slice `text` back to the word, in order, and every word of the text is there."""
    for word in words:
        assert text[word["start_char"] : word["end_char"]] == word["word"], word
    assert [(w["start_char"], w["end_char"]) for w in words] == [(w.start, w.end) for w in text_words(text)]


def assert_monotonic(words: list[dict]) -> None:
    """Every word lasts, and none starts before the one before it ends."""
    for before, after in zip(words, words[1:], strict=False):
        assert before["end_ms"] <= after["start_ms"], (before, after)
    for word in words:
        assert 0 <= word["start_ms"] < word["end_ms"], word


def assert_cover_speech(words: list[dict], samples: np.ndarray, rate: int, shift_ms: float = 0.0) -> None:
    """Loud 20 ms frames lie within the words (allowing 40 ms at their edges), and every word has some loud frames."""
    frame = rate // 50
    count = len(samples) // frame
    energy = np.sqrt(np.mean(samples[: count * frame].reshape(count, frame) ** 2, axis=1))
    loud = energy > 0.1 * energy.max()
    inside = np.zeros(count, dtype=bool)
    for word in words:
        first = int((word["start_ms"] - shift_ms - 40) / 20)
        last = int((word["end_ms"] - shift_ms + 40) / 20) + 1
        inside[max(first, 0) : max(last, 0)] = True
        assert loud[max(first, 0) : max(last, 0)].any(), f"no speech during {word}"
    assert loud.sum() and (loud & ~inside).sum() <= 0.05 * loud.sum(), f"{(loud & ~inside).sum()} loud frames outside the words"
