"""SentenceSplitter: streamed text in, complete units (sentences or clauses) out, as soon as each is certain.

A session's text arrives in arbitrary pieces (an LLM's tokens, a word, half a word).
Speech should start as soon as the first sentence is complete, yet a sentence
must never be cut where a whole text would not be: feeding a text in any pieces
gives exactly the units that feeding it whole gives. So every decision that
needs to see past the end of the buffer (is this "." followed by a space? by a
digit? by a closing quote?) waits for more text, a flush, or the idle timeout.

Rules, in the order they are applied:
- A unit ends at a terminator (sentence: `. ! ?` and script terminators such as
  `。 ！ ？ … । ؟`; clause granularity adds `, ; :` and `， 、 ； ： ، ؛`), extended
  over the run of terminators and closing quotes and brackets that follows it
  (`Wait...`, `what?!`, `He said "Hi."`).
- ASCII terminators end a unit only when whitespace follows (`example.com`,
  `3.14`, `1,000` and `e.g.` mid-token stay whole); script terminators end one
  regardless.
- A `.` is not a sentence end after a title (`Dr.`, `Mrs.`), a single-letter
  initial (`J. Smith`; the pronoun `I` excepted), dotted initials (`U.S.`, `e.g.`),
  a list number that opens the unit (`1. First`), a reference word before a
  number (`No. 5`, `Fig. 3`), or an abbreviation that can end a sentence (`etc.`,
  `Inc.`, `p.m.`) unless the next word starts with a capital letter.
- A clause shorter than `min_clause_chars` is merged with what follows (no "Well," alone).
- A unit longer than `max_unit_chars` is cut at its last clause mark, else its last
  space, else at the limit. With AUTO granularity the limit after a unit is also at most
  AUTO_GROWTH times that unit (but at least AUTO_MIN_CHARS), so that a long sentence after
  a short one is cut at a clause: its first part is spoken before the short one has
  finished playing, even while the text is still arriving (a streaming LLM). With AUTO and
  CLAUSE granularity the first unit of a turn (at the start, after a flush or a clear) longer than FIRST_WHOLE_CHARS
  is cut at its last clause mark within FIRST_CHARS (in the second half), else at its last
  space within FIRST_SPACE_CHARS, so that a long first sentence does not hold back the first
  audio; the rest of it follows as the next unit. A unit that ends a sentence
  cut before it counts as long as the whole sentence (so the short tail of a cut sentence does
  not make the next sentence be cut as well).
- Units are stripped of surrounding whitespace; pieces with no letter or digit are dropped.

Offsets in TextUnit count characters (code points) from the start of everything
fed to the splitter, so they point into the session's input as the caller sent it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

DEFAULT_MAX_UNIT_CHARS = 300
"""Longest unit by default: long enough for nearly every sentence, short enough to bound first-audio latency."""
DEFAULT_IDLE_FLUSH_S = 1.0
"""Buffered text is synthesized after this long without new text (a stalled LLM, a missing flush)."""
DEFAULT_MIN_CLAUSE_CHARS = 12
"""With clause granularity, shorter clauses are merged with what follows."""
AUTO_GROWTH = 3
"""With AUTO granularity, a unit is at most this many times as long as the one before it..."""
AUTO_MIN_CHARS = 40
"""...but may always be this long."""
FIRST_WHOLE_CHARS = 80
"""With AUTO (and CLAUSE) granularity, a turn's first sentence (clause) up to this long is its first unit (cut
shorter, it would leave a tail of a word or two)..."""
FIRST_CHARS = 60
"""...and a longer one is cut at a clause mark within this many characters, so that the first audio waits only
for about ten words (a clause such as "The lighthouse stood on a rock at the edge of the bay,")..."""
FIRST_SPACE_CHARS = 48
"""...or, with no clause mark there, at a space within this many: a cut between two words is no natural pause,
so it is worth no more wait than the first audio needs."""

SENTENCE_ASCII = ".!?"
SENTENCE_SCRIPT = "。！？｡．…‼⁇⁈⁉।॥؟۔።፧፨။።។៕"
CLAUSE_ASCII = ",;:"
CLAUSE_SCRIPT = "，、；：،؛၊፣፤"
CLOSERS = "\"')]}”’»›」』）】〉》〕〗〙〛］｝"

# Titles: always followed by a name, never a sentence end.
_TITLES = frozenset(
    "mr mrs ms mx dr prof rev fr gen col lt sgt capt cmdr adm gov sen rep hon pres supt insp st mt messrs mme mlle".split()
)
# Never a sentence end either.
_NEVER_END = frozenset("vs cf viz approx ca esp incl dept est".split())
# Abbreviations before a number: "No. 5", "Fig. 3", "pp. 12".
_BEFORE_NUMBER = frozenset("no nos nr fig figs vol vols p pp ch chap sec art eq ref op".split())
# Abbreviations that end a sentence when the next word is capitalized ("... and so on, etc. Then").
_MAYBE_END = frozenset("etc inc ltd co corp llc plc al jr sr bros a.m p.m".split())
_DOTTED_INITIALS = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_WHITESPACE = re.compile(r"\s")


class Granularity(enum.Enum):
    """Where a session's text is cut into units."""

    AUTO = "auto"
    """Sentences; a long first one, or a long one right after a short unit, is cut at a clause mark
    (see FIRST_WHOLE_CHARS and AUTO_GROWTH)."""
    SENTENCE = "sentence"
    CLAUSE = "clause"
    NONE = "none"
    """No automatic units: the whole buffer is one unit at each flush (and no idle flush)."""


@dataclass(frozen=True)
class TextUnit:
    """One unit to synthesize, with where it sits in the text fed so far."""

    text: str
    """The unit, stripped of surrounding whitespace: exactly fed_text[start:end]."""
    start: int
    end: int


class _Undecided(Exception):
    """A decision needs text that has not arrived yet."""


class SentenceSplitter:
    """Cuts incrementally fed text into units; pure bookkeeping, safe to test without a clock.

    feed() returns the units that became certain; flush() returns the rest. Times
    (`now`) are the caller's clock, in seconds; the splitter never reads one itself.
    """

    def __init__(
        self,
        granularity: Granularity = Granularity.AUTO,
        max_unit_chars: int = DEFAULT_MAX_UNIT_CHARS,
        idle_flush_s: float | None = DEFAULT_IDLE_FLUSH_S,
        min_clause_chars: int = DEFAULT_MIN_CLAUSE_CHARS,
    ) -> None:
        if max_unit_chars < 1:
            raise ValueError("max_unit_chars must be at least 1")
        self.granularity = granularity
        self.max_unit_chars = max_unit_chars
        self.idle_flush_s = idle_flush_s or None
        self.min_clause_chars = min_clause_chars
        self._buffer = ""
        self._offset = 0
        """Offset of the buffer's first character in everything fed."""
        self._last_feed_at: float | None = None
        self._previous_chars: int | None = None
        """Length of the unit before, with the earlier pieces of its sentence if it was cut; None at a turn's start (for AUTO)."""
        self._sentence_chars = 0
        """Length of the pieces of a sentence cut so far, when the last unit was such a piece (for AUTO)."""
        ascii_terms = SENTENCE_ASCII + (CLAUSE_ASCII if granularity is Granularity.CLAUSE else "")
        script_terms = SENTENCE_SCRIPT + (CLAUSE_SCRIPT if granularity is Granularity.CLAUSE else "")
        self._ascii = frozenset(ascii_terms)
        self._terminators = frozenset(ascii_terms + script_terms)
        self._clause_marks = frozenset(CLAUSE_ASCII + CLAUSE_SCRIPT)
        self._run = frozenset(SENTENCE_ASCII + SENTENCE_SCRIPT + CLAUSE_ASCII + CLAUSE_SCRIPT + CLOSERS)

    @property
    def buffered(self) -> str:
        """Text fed but not yet part of a unit."""
        return self._buffer

    @property
    def fed_chars(self) -> int:
        """Characters fed so far (cleared ones included)."""
        return self._offset + len(self._buffer)

    def feed(self, text: str, now: float | None = None) -> list[TextUnit]:
        """Append `text` verbatim; return the units it completed."""
        self._buffer += text
        if now is not None:
            self._last_feed_at = now
        if self.granularity is Granularity.NONE:
            return []
        return self._extract(final=False)

    def flush(self) -> list[TextUnit]:
        """Everything buffered, as units: the end of the text is taken as the end of a unit (and of a turn)."""
        if self.granularity is Granularity.NONE:
            units = self._units(0, len(self._buffer))
            self._consume(len(self._buffer))
            return units
        units = self._extract(final=True)
        self._start_turn()
        return units

    def clear(self) -> None:
        """Drop the buffered text (its offsets stay used)."""
        self._consume(len(self._buffer))
        self._start_turn()

    def tentative(self) -> TextUnit | None:
        """The unit that ends at the end of the buffer if the text ends there, when only the next text can tell.

        "Hello." at the end of the buffer is a sentence if a space follows, not if "com"
        does. A caller may synthesize the tentative unit at once and speak it when a
        later feed() or flush() returns that same unit first, or drop it otherwise.
        """
        if self.granularity is Granularity.NONE:
            return None
        buffer = self._buffer
        tail = len(buffer.rstrip())
        k = tail
        while k > 0 and buffer[k - 1] in self._run:
            k -= 1
        if not any(ch in self._terminators for ch in buffer[k:tail]):
            return None  # no sentence end in sight
        pos = len(buffer) - len(buffer.lstrip())
        end = self._boundary(pos, final=True)
        if end is None or end < tail or end - pos > self._max_chars():
            return None
        units = self._units(pos, end)
        return units[0] if units else None

    def idle_deadline(self) -> float | None:
        """When the buffered text is flushed for want of more (None: nothing to flush, or no idle flush)."""
        if self.idle_flush_s is None or self.granularity is Granularity.NONE or self._last_feed_at is None:
            return None
        if not self._buffer.strip():
            return None
        return self._last_feed_at + self.idle_flush_s

    def poll(self, now: float) -> list[TextUnit]:
        """The idle flush: everything buffered if no text came for idle_flush_s, else nothing."""
        deadline = self.idle_deadline()
        if deadline is None or now < deadline:
            return []
        return self.flush()

    # -- scanning -------------------------------------------------------------------

    def _extract(self, final: bool) -> list[TextUnit]:
        units: list[TextUnit] = []
        buffer = self._buffer
        pos = 0
        while True:
            while pos < len(buffer) and buffer[pos].isspace():
                pos += 1
            if pos >= len(buffer):
                break
            try:
                end = self._boundary(pos, final)
            except _Undecided:
                break  # a terminator within reach waits for more text
            cut = False
            if end is None or end - pos > self._max_chars():
                if len(buffer) - pos > self._max_chars():
                    end, cut = self._forced_cut(pos), True
                elif final:
                    end = len(buffer)
                else:
                    break
            found = self._units(pos, end)
            if found:
                self._previous_chars = self._sentence_chars + len(found[0].text)
                self._sentence_chars = self._previous_chars if cut else 0
            units.extend(found)
            pos = end
        self._consume(pos)
        return units

    def _opens_turn_short(self) -> bool:
        """Whether the next unit opens a turn and must be short: the granularities made for early audio (AUTO,
        CLAUSE) do not let a long first sentence or clause hold back the first audio on any protocol."""
        return self._previous_chars is None and self.granularity in (Granularity.AUTO, Granularity.CLAUSE)

    def _max_chars(self) -> int:
        """Longest next unit that is kept whole."""
        if self._opens_turn_short():
            return min(self.max_unit_chars, FIRST_WHOLE_CHARS)
        if self.granularity is not Granularity.AUTO:
            return self.max_unit_chars
        return min(self.max_unit_chars, max(AUTO_MIN_CHARS, AUTO_GROWTH * self._previous_chars))

    def _cut_windows(self) -> tuple[int, int]:
        """Longest next unit when it has to be cut, at a clause mark and at a space: shorter than _max_chars() for a
        turn's first unit."""
        if self._opens_turn_short():
            return min(self.max_unit_chars, FIRST_CHARS), min(self.max_unit_chars, FIRST_SPACE_CHARS)
        return self._max_chars(), self._max_chars()

    def _boundary(self, pos: int, final: bool) -> int | None:
        """End of the first unit starting at `pos`, None if none ends within _max_chars(); raises _Undecided."""
        buffer = self._buffer
        limit = min(len(buffer), pos + self._max_chars())
        i = pos
        while i < limit:
            if buffer[i] in self._terminators:
                end = self._unit_end(pos, i, final)
                if end is not None:
                    return end
            i += 1
        return None

    def _unit_end(self, pos: int, i: int, final: bool) -> int | None:
        """Where the unit ends if the terminator at `i` ends one, else None; raises _Undecided."""
        buffer = self._buffer
        j = i + 1
        while j < len(buffer) and buffer[j] in self._run:
            j += 1
        at_end = j == len(buffer)
        if at_end and not final:
            raise _Undecided  # more terminators or closing quotes may follow
        char = buffer[i]
        if char in self._clause_marks and j - pos < self.min_clause_chars:
            return None
        if char not in self._ascii:
            return j  # script terminators need no space after them
        if not at_end and not buffer[j].isspace():
            return None  # "example.com", "3.14", "1,000"
        if char == "." and not self._dot_ends_sentence(pos, i, j, final):
            return None
        return j

    def _dot_ends_sentence(self, pos: int, i: int, j: int, final: bool) -> bool:
        buffer = self._buffer
        k = i
        while k > pos and not buffer[k - 1].isspace():
            k -= 1
        word = buffer[k:i].lstrip("\"'([{“‘«‹「『（【")
        lower = word.lower()
        if not word:
            return True
        if word.isdigit() and buffer[pos:i].strip() == word:
            return False  # a list number opening the unit: "1. First"
        if len(word) == 1 and word.isalpha() and word != "I":
            return False  # an initial: "J. Smith"
        if lower in _TITLES or lower in _NEVER_END:
            return False
        if lower in _MAYBE_END:
            return self._next_word_starts(j, final, str.isupper, default=True)
        if _DOTTED_INITIALS.fullmatch(word):
            return False  # "U.S.", "e.g.", "J.R.R."
        if lower in _BEFORE_NUMBER:
            return not self._next_word_starts(j, final, str.isdigit, default=False)
        return True

    def _next_word_starts(self, j: int, final: bool, test, default: bool) -> bool:
        """Whether the first non-space character after `j` passes `test`; raises _Undecided if it has not arrived."""
        buffer = self._buffer
        while j < len(buffer) and buffer[j].isspace():
            j += 1
        if j == len(buffer):
            if final:
                return default
            raise _Undecided
        return test(buffer[j])

    def _forced_cut(self, pos: int) -> int:
        """Where to cut a unit that found no boundary within _max_chars() (needs one character more than that):
        within _cut_windows()."""
        buffer = self._buffer
        clause_window, space_window = self._cut_windows()
        limit, space_limit = pos + clause_window, pos + space_window
        half = pos + clause_window // 2
        last_space = None
        for k in range(limit, pos, -1):
            clause_before = buffer[k - 1] in CLAUSE_SCRIPT or (buffer[k - 1] in CLAUSE_ASCII and buffer[k].isspace())
            if clause_before and k >= half:
                return k  # the last clause mark in the second half of the window
            if last_space is None and k <= space_limit and buffer[k].isspace():
                last_space = k
        return last_space if last_space is not None else space_limit

    # -- bookkeeping ----------------------------------------------------------------

    def _start_turn(self) -> None:
        """The next unit is a turn's first (after a flush or a clear): no unit before it to grow from."""
        self._previous_chars = None
        self._sentence_chars = 0

    def _units(self, start: int, end: int) -> list[TextUnit]:
        piece = self._buffer[start:end]
        text = piece.strip()
        if not any(ch.isalnum() for ch in text):
            return []
        lead = len(piece) - len(piece.lstrip())
        first = self._offset + start + lead
        return [TextUnit(text, first, first + len(text))]

    def _consume(self, count: int) -> None:
        self._buffer = self._buffer[count:]
        self._offset += count
