"""Words asked to be timed that got no time: a WORD_NOT_TIMED warning that says which and why.

A model or the forced aligner may be unable to time a word (a word in a script the aligner has no letter of, a
symbol the model does not speak, an utterance whose audio is too short for its text). Its WordTimings then lack it,
and the caller is told so with a warning after the utterance's audio, as for any other thing the server skips
(docs/API.md). The reason is the stage's where it gave one; a word that simply never got a time gets a general one.
"""

from __future__ import annotations

from collections.abc import Iterable

from vocalis.stages.text.word_times import UntimedWord, text_words
from vocalis.tts.v1 import synthesizer_pb2 as pb

CODE = "WORD_NOT_TIMED"
FIELD = "word_timestamps"
NO_TIME_CAME = "the model gave it no time (a word it does not speak)"
LISTED = 8
"""Words named in one warning; the rest are counted (a warning stays short, whatever the text)."""
WORD_CHARS = 32
"""Characters of a word quoted in the warning; a longer word is cut (its offsets say where it is)."""


def untimed_warning(text: str, text_start: int, timed: set[tuple[int, int]], reported: Iterable[UntimedWord]) -> pb.Warning | None:
    """The warning for the words of `text` (one utterance, at `text_start` in the session's text) with no time among
    `timed` ((start, end) offsets into `text`), each with its reason from `reported` where a stage gave one; None when
    every word was timed."""
    reasons = {(word.char_start, word.char_end): word.reason for word in reported}
    missing = [(word, reasons.get((word.start, word.end), NO_TIME_CAME)) for word in text_words(text) if (word.start, word.end) not in timed]
    if not missing:
        return None
    by_reason: dict[str, list[str]] = {}
    for word, reason in missing[:LISTED]:
        quoted = word.text if len(word.text) <= WORD_CHARS else word.text[:WORD_CHARS] + "…"
        by_reason.setdefault(reason, []).append(f"{quoted!r} (characters {text_start + word.start}-{text_start + word.end})")
    parts = [f"{', '.join(words)}: {reason}" for reason, words in by_reason.items()]
    if len(missing) > LISTED:
        parts.append(f"and {len(missing) - LISTED} more")
    count = f"{len(missing)} word{'s' if len(missing) > 1 else ''}"
    return pb.Warning(code=CODE, field=FIELD, message=f"{count} got no time: {'; '.join(parts)}")
