"""Word times of an utterance: which word of its text is spoken when in its audio.

A stage that knows (Piper from its own phoneme durations, the forced-aligner stage from a CTC
model) hands them to the request with `SynthesisRequest.emit_words`; they travel to the server
on the request's audio stream, in sample positions at the model's rate and character offsets
into the utterance's text, and the server turns them into session times and offsets.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from vocalis.stages.text.spoken_form import SYMBOLS


@dataclass(frozen=True)
class WordTime:
    """One spoken word of an utterance."""

    word: str
    """The word as it appears in the utterance's text (surrounding punctuation left out)."""
    char_start: int
    """Offset of its first character in the utterance's text."""
    char_end: int
    """One past its last character."""
    start_sample: int
    """First sample of the word in the utterance's audio, at the model's rate."""
    end_sample: int
    """One past its last sample."""


@dataclass(frozen=True)
class UntimedWord:
    """A word of an utterance that could not be timed, and why (the caller is told: no word is dropped in silence)."""

    word: str
    char_start: int
    char_end: int
    reason: str
    """Why, for people: "none of its characters is in the forced aligner's vocabulary"."""


_TOKEN = re.compile(r"\S+")


def _is_edge_mark(char: str) -> bool:
    """Punctuation that ends or opens a word without being spoken by itself ("Hello," "(see").

    Currency and other symbols that are read aloud ("$", "%", "&", "#", "@", "+") stay part of the word, and one
    standing alone ("&") is a word of its own."""
    return unicodedata.category(char)[0] == "P" and char not in SYMBOLS


@dataclass(frozen=True)
class TextWord:
    """A word of a text, located."""

    text: str
    start: int
    end: int


def text_words(text: str) -> list[TextWord]:
    """The words of `text` in order: runs of non-space characters less leading and trailing punctuation
    ("Hello," -> "Hello", "(100%)" -> "100%"); a run that is only punctuation ("--", "...") is no word, a symbol
    read aloud ("&") is one."""
    words = []
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        while start < end and _is_edge_mark(text[start]):
            start += 1
        while end > start and _is_edge_mark(text[end - 1]):
            end -= 1
        if start < end:
            words.append(TextWord(text[start:end], start, end))
    return words
