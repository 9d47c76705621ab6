"""Server-side bounds on what one Piper run gets, whatever the caller asked for.

A VITS run's memory grows with its phoneme ids (its output frames): a single
unit of 300 CJK characters spelled out by an English voice is over 4,000 ids
and took gigabytes. So the text of a unit is cut into pieces of at most
MAX_PIECE_CHARS (at a sentence or clause mark, else a space), and the phonemes
of a sentence into runs of at most MAX_IDS_PER_RUN ids (after punctuation,
else between words). Text within the bounds, nearly all of it, is untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vocalis.stages.text.sentence_splitter import Granularity, SentenceSplitter

MAX_PIECE_CHARS = 500
"""Longest text phonemized at once (the caller's max_unit_chars may be far larger)."""
MAX_IDS_PER_RUN = 500
"""Most phoneme ids in one ONNX run at normal speed or faster (fewer when slower): about 12 s of speech, a few hundred
MB at peak."""
MIN_IDS_PER_RUN = 100
"""The cap for the slowest speech never goes below this."""

_PUNCTUATION = frozenset(",;:.!?¡¿—…")


def text_pieces(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """`text` itself if short enough, else its sentences, cut at clause marks or spaces where still too long."""
    return [piece for _, piece in located_text_pieces(text, max_chars)]


def located_text_pieces(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[tuple[int, str]]:
    """text_pieces(), each with its offset in `text`."""
    if len(text) <= max_chars:
        return [(0, text)]
    splitter = SentenceSplitter(Granularity.SENTENCE, max_unit_chars=max_chars, idle_flush_s=None)
    return [(unit.start, unit.text) for unit in (*splitter.feed(text), *splitter.flush())]


def phoneme_runs(
    phonemes: list[str], to_ids: Callable[[list[str]], list[int]], max_ids: int = MAX_IDS_PER_RUN
) -> Iterator[list[int]]:
    """The ids of `phonemes`, in runs of at most `max_ids`, cut after punctuation or else between words."""
    for _, _, ids in located_phoneme_runs(phonemes, to_ids, max_ids):
        yield ids


def located_phoneme_runs(
    phonemes: list[str], to_ids: Callable[[list[str]], list[int]], max_ids: int = MAX_IDS_PER_RUN, start: int = 0
) -> Iterator[tuple[int, list[str], list[int]]]:
    """phoneme_runs(), each run as (index of its first phoneme, its phonemes, its ids)."""
    ids = to_ids(phonemes)
    if len(ids) <= max_ids or len(phonemes) <= 1:
        yield start, phonemes, ids
        return
    # Each phoneme is an id and a pad, plus the start/end markers: aim below the cap, then check.
    budget = max(1, min(len(phonemes) - 1, (max_ids - 4) // 2))
    cut = _cut(phonemes, budget)
    yield from located_phoneme_runs(phonemes[:cut], to_ids, max_ids, start)
    yield from located_phoneme_runs(phonemes[cut:], to_ids, max_ids, start + cut)


def _cut(phonemes: list[str], budget: int) -> int:
    """Where to end a run of at most `budget` phonemes: after the last punctuation in its second half, else after its
    last space, else at the budget."""
    last_space = None
    for k in range(budget, 0, -1):
        previous = phonemes[k - 1]
        if previous in _PUNCTUATION and k >= budget // 2:
            return k
        if last_space is None and previous == " ":
            last_space = k
    return last_space or budget
