"""Words written with digits and symbols, spelled as they are spoken for the forced aligner."""

from __future__ import annotations

import pytest

from tests.stages.text.aligner.tiny_ctc import VOCAB
from vocalis.stages.text.aligner.transcript import transcript
from vocalis.stages.text.spoken_form import cardinal, ordinal, spoken_form, year
from vocalis.stages.text.word_times import text_words


@pytest.mark.parametrize(
    ("word", "spoken"),
    [
        ("$3.50", "three dollars fifty cents"),
        ("$1", "one dollar"),
        ("£2.05", "two pounds five pence"),
        ("7:45", "seven forty five"),
        ("7:05", "seven oh five"),
        ("10:00", "ten"),
        ("50", "fifty"),
        ("12", "twelve"),
        ("555-0123", "five five five oh one two three"),
        ("2-1", "two one"),
        ("2024", "twenty twenty four"),
        ("1999", "nineteen ninety nine"),
        ("2005", "two thousand five"),
        ("1,234,567", "one million two hundred thirty four thousand five hundred sixty seven"),
        ("100%", "one hundred percent"),
        ("3.5%", "three point five percent"),
        ("3.14", "three point one four"),
        ("1st", "first"),
        ("22nd", "twenty second"),
        ("&", "and"),
        ("#1", "number one"),
        ("COVID-19", "COVID nineteen"),
        ("Q&A", "Q and A"),
        ("hello", "hello"),
    ],
)
def test_spoken_forms(word, spoken):
    assert spoken_form(word) == spoken


def test_numbers():
    assert cardinal(0) == "zero" and cardinal(105) == "one hundred five" and cardinal(2_000_001) == "two million one"
    assert ordinal(3) == "third" and ordinal(40) == "fortieth" and ordinal(112) == "one hundred twelfth"
    assert year(1900) == "nineteen hundred" and year(2010) == "twenty ten" and year(1905) == "nineteen oh five"


def test_spoken_symbols_stay_part_of_their_word_and_stand_alone():
    text = "It costs $3.50 (100%) & more, #1 at 7:45."
    assert [w.text for w in text_words(text)] == ["It", "costs", "$3.50", "100%", "&", "more", "#1", "at", "7:45"]


def test_every_word_of_numbers_and_symbols_gets_tokens_in_the_transcript():
    vocab = {token: index for index, token in enumerate(VOCAB)}
    text = "Pay $3.50 at 7:45, call 555-0123 in 2024: 1,234,567 people, 100% & 12 of 50 won 2-1."
    words = transcript(text, vocab)
    assert [w.text for w, _, _ in words.words] == [w.text for w in text_words(text)]
    spans = {w.text: (first, end) for w, first, end in words.words}
    first, end = spans["$3.50"]
    spelled = "".join(VOCAB[t] for t in words.tokens[first:end])
    assert spelled == "THREE|DOLLARS|FIFTY|CENTS"
