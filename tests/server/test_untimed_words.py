"""The WORD_NOT_TIMED warning: which words of an utterance got no time and why, in session offsets, kept short."""

from __future__ import annotations

from vocalis.server.untimed_words import LISTED, NO_TIME_CAME, untimed_warning
from vocalis.stages.text.word_times import UntimedWord, text_words


def test_every_word_timed_is_no_warning():
    text = "Hello, brave world."
    assert untimed_warning(text, 0, {(w.start, w.end) for w in text_words(text)}, []) is None


def test_a_word_with_no_time_is_named_at_its_session_offsets_with_the_stages_reason_or_the_general_one():
    text = "Say Привет & goodbye."  # at offset 100 of the session's text
    timed = {(0, 3), (13, 20)}  # "Say", "goodbye"
    warning = untimed_warning(text, 100, timed, [UntimedWord("Привет", 4, 10, "no letter the aligner knows")])
    assert warning is not None and warning.code == "WORD_NOT_TIMED" and warning.field == "word_timestamps"
    assert warning.message == (
        f"2 words got no time: 'Привет' (characters 104-110): no letter the aligner knows; '&' (characters 111-112): {NO_TIME_CAME}"
    )


def test_a_long_list_is_cut_and_counted():
    text = " ".join(["Привет"] * 50) + " " + "я" * 1000
    warning = untimed_warning(text, 0, set(), [])
    assert warning is not None and warning.message.startswith("51 words got no time: ")
    assert warning.message.count("'Привет'") == LISTED and warning.message.endswith(f"and {51 - LISTED} more")
    assert len(warning.message) < 1000
