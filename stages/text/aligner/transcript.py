"""The text of an utterance as a CTC model's tokens, word by word.

A word written with digits or symbols read aloud is spelled as it is spoken ("$3.50" as "three dollars fifty
cents", stages/text/spoken_form.py), its spoken words apart as words are, and its time is the caller's word's.
Characters the vocabulary still lacks (most punctuation, other scripts) are left out; a word left with no token
at all cannot be placed: it gets no time and is listed as untimed, for the caller to be told. Letters take the vocabulary's case (wav2vec2 English checkpoints spell
in capitals, MMS ones in lower case).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from vocalis.stages.text.spoken_form import spoken_form
from vocalis.stages.text.word_times import TextWord, text_words


@dataclass(frozen=True)
class Transcript:
    """The tokens of a text and, for each word that has some, where they are."""

    tokens: list[int]
    words: list[tuple[TextWord, int, int]]
    """(word, index of its first token, one past its last)."""
    untimed: list[TextWord]
    """The words with no token of the vocabulary (another script than the checkpoint's), in order."""


def transcript(text: str, vocab: dict[str, int], word_delimiter: str | None = "|") -> Transcript:
    lower = sum(1 for c in vocab if c.islower()) >= sum(1 for c in vocab if c.isupper())
    delimiter = vocab.get(word_delimiter) if word_delimiter else None
    tokens: list[int] = []
    words: list[tuple[TextWord, int, int]] = []
    untimed: list[TextWord] = []
    for word in text_words(text):
        ids: list[int] = []
        for part in spoken_form(word.text).split():
            spelled = unicodedata.normalize("NFC", part.lower() if lower else part.upper())
            part_ids = [vocab[c] for c in spelled if c in vocab]
            if part_ids and ids and delimiter is not None:
                ids.append(delimiter)
            ids += part_ids
        if not ids:
            untimed.append(word)
            continue
        if tokens and delimiter is not None:
            tokens.append(delimiter)
        words.append((word, len(tokens), len(tokens) + len(ids)))
        tokens += ids
    return Transcript(tokens, words, untimed)

