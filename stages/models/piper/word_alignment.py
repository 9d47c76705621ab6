"""Piper's word times: its own phoneme durations, mapped from phonemes back to the words of the text.

A Piper voice decides how many frames each phoneme id lasts (the `Ceil` of its duration
predictor); `piper.patch_voice_with_alignment` exposes that tensor as a graph output, so every
run says exactly where each phoneme sits in its audio. espeak-ng's phonemes keep word boundaries
only loosely: it expands numbers ("4729" is four words), and it joins some words ("did not" is
one phoneme word). So each word of the text is phonemized on its own too, and the sentence's
phonemes are matched to the words' phonemes by a sequence alignment (difflib): every phoneme of
the sentence gets the word it most likely belongs to, and a word spans from the start of its
first phoneme to the end of its last. A word espeak-ng does not speak (a lone symbol it skips)
gets no time.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from piper.const import BOS, EOS, PAD

from vocalis.stages.text.word_times import TextWord, WordTime, text_words

_NOT_MATCHED = frozenset(" ,;:.!?¡¿—…-'\"()ˈˌ")
"""Phonemes left out of the matching: word gaps, punctuation (pauses) and stress marks."""
_STRESS = frozenset("ˈˌ")


def phoneme_sample_spans(
    phonemes: Sequence[str], id_map: Mapping[str, Sequence[int]], id_samples: np.ndarray
) -> list[tuple[int, int] | None]:
    """[start, end) samples of each phoneme of one run (its ids and the pad after it), as piper.phonemes_to_ids
    lays out the ids; None for a phoneme the voice has no id for. ValueError if the sample counts do not fit."""
    bounds = np.concatenate([[0], np.cumsum(np.asarray(id_samples, dtype=np.int64))])
    pad = len(id_map.get(PAD, ()))
    position = len(id_map[BOS]) + pad
    spans: list[tuple[int, int] | None] = []
    for phoneme in phonemes:
        ids = id_map.get(phoneme)
        if ids is None:
            spans.append(None)
            continue
        end = position + len(ids) + pad
        spans.append((int(bounds[position]), int(bounds[end])))
        position = end
    if position + len(id_map[EOS]) != len(bounds) - 1:
        raise ValueError(f"{len(bounds) - 1} duration values for {position + len(id_map[EOS])} phoneme ids")
    return spans


def owners(sentence_phonemes: Sequence[str], word_phonemes: Sequence[Sequence[str]]) -> list[int | None]:
    """For each phoneme of the spoken sequence, the index of the word it belongs to (None for gaps and pauses).

    `word_phonemes[k]` are the phonemes of word k said on its own. Matching phonemes are paired by
    difflib; a run that differs takes the words of the run it replaces, in proportion; an extra
    phoneme inside a phoneme word takes the word of the phoneme before it, a stress mark that of the one after it."""
    spoken = [i for i, p in enumerate(sentence_phonemes) if p not in _NOT_MATCHED]
    said = [(k, p) for k, phonemes in enumerate(word_phonemes) for p in phonemes if p not in _NOT_MATCHED]
    result: list[int | None] = [None] * len(sentence_phonemes)
    matcher = difflib.SequenceMatcher(None, [sentence_phonemes[i] for i in spoken], [p for _, p in said], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            for offset in range(i2 - i1):
                result[spoken[i1 + offset]] = said[j1 + offset * (j2 - j1) // (i2 - i1)][0]
    previous: int | None = None
    for i, phoneme in enumerate(sentence_phonemes):  # extra phonemes: the word they are spoken within
        if phoneme == " ":
            previous = None
        elif result[i] is None and phoneme not in _NOT_MATCHED:
            result[i] = previous
        if result[i] is not None:
            previous = result[i]
    for i in range(len(sentence_phonemes) - 2, -1, -1):  # a stress mark belongs to the syllable it precedes
        if sentence_phonemes[i] in _STRESS:
            result[i] = result[i + 1]
    return result


@dataclass
class _Word:
    text: TextWord
    first: tuple[int, int] | None = None
    """(sentence, phoneme) of its first phoneme, if it has any."""
    last: tuple[int, int] | None = None


@dataclass
class PieceWords:
    """The words of one phonemized piece of an utterance's text, and their times as its runs are synthesized."""

    offset: int
    """Where the piece starts in the utterance's text."""
    words: list[_Word]
    spans: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    """Sample span in the utterance's audio of each (sentence, phoneme) synthesized so far."""
    next_word: int = 0

    @classmethod
    def build(
        cls,
        piece: str,
        offset: int,
        sentences: Sequence[Sequence[str]],
        word_phonemes: Sequence[Sequence[str]],
        id_map: Mapping[str, Sequence[int]],
    ) -> PieceWords:
        """`sentences`: the piece's phonemes by sentence; `word_phonemes`: those of each of text_words(piece) alone."""
        words = [_Word(word) for word in text_words(piece)]
        flat = [(s, i, p) for s, phonemes in enumerate(sentences) for i, p in enumerate(phonemes)]
        for position, owner in enumerate(owners([p for _, _, p in flat], word_phonemes)):
            if owner is None or flat[position][2] not in id_map:  # a phoneme without an id is not synthesized
                continue
            s, i, _ = flat[position]
            word = words[owner]
            word.first = word.first or (s, i)
            word.last = (s, i)
        return cls(offset, words)

    def timed(self, sentence: int, start: int, spans: Sequence[tuple[int, int] | None], at_sample: int) -> list[WordTime]:
        """Record a run (phonemes start.. of `sentence`, audio from `at_sample`); the words now complete, in order."""
        for i, span in enumerate(spans):
            if span is not None:
                self.spans[(sentence, start + i)] = (at_sample + span[0], at_sample + span[1])
        done: list[WordTime] = []
        while self.next_word < len(self.words):
            word = self.words[self.next_word]
            if word.first is not None:
                if word.last not in self.spans or word.first not in self.spans:
                    break
                done.append(
                    WordTime(
                        word.text.text,
                        self.offset + word.text.start,
                        self.offset + word.text.end,
                        self.spans[word.first][0],
                        self.spans[word.last][1],
                    )
                )
            self.next_word += 1
        return done
