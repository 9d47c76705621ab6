"""SentenceSplitter over tricky text: boundaries, abbreviations, numbers, scripts, limits, idle flush, and split invariance."""

from __future__ import annotations

import random

import pytest

from vocalis.stages.text.sentence_splitter import Granularity, SentenceSplitter, TextUnit


def units(text: str, **options) -> list[str]:
    """The units of `text` fed whole, then flushed."""
    splitter = SentenceSplitter(idle_flush_s=None, **options)
    return [u.text for u in splitter.feed(text) + splitter.flush()]


def fed_in_pieces(text: str, cuts: list[int], **options) -> list[TextUnit]:
    splitter = SentenceSplitter(idle_flush_s=None, **options)
    out: list[TextUnit] = []
    bounds = [0, *sorted(cuts), len(text)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        out += splitter.feed(text[start:end])
    return out + splitter.flush()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello world. How are you? I am fine!", ["Hello world.", "How are you?", "I am fine!"]),
        ("Wait... what?! Really.", ["Wait...", "what?!", "Really."]),
        ('He said "Hi." Then he left.', ['He said "Hi."', "Then he left."]),
        ("(See the note.) Next one.", ["(See the note.)", "Next one."]),
        ("Dr. Smith met Mrs. Jones. They talked.", ["Dr. Smith met Mrs. Jones.", "They talked."]),
        ("J. R. R. Tolkien wrote it. So do I. We agree.", ["J. R. R. Tolkien wrote it.", "So do I.", "We agree."]),
        ("I live in the U.S. and e.g. Canada is near. Yes.", ["I live in the U.S. and e.g. Canada is near.", "Yes."]),
        ("Apples, pears, etc. Then we ate. Apples etc. are fruit.", ["Apples, pears, etc.", "Then we ate.", "Apples etc. are fruit."]),
        ("See No. 5 and Fig. 3 for details. No. That is wrong.", ["See No. 5 and Fig. 3 for details.", "No.", "That is wrong."]),
        ("It costs 3.14 dollars, or 1,000 cents. Pi is 3. Next.", ["It costs 3.14 dollars, or 1,000 cents.", "Pi is 3.", "Next."]),
        ("1. First item. 2. Second item.", ["1. First item.", "2. Second item."]),
        ("Visit example.com. Hello.World is one token.", ["Visit example.com.", "Hello.World is one token."]),
        ("你好。世界！「引用。」好吗？", ["你好。", "世界！", "「引用。」", "好吗？"]),
        ("नमस्ते। आप कैसे हैं?", ["नमस्ते।", "आप कैसे हैं?"]),
        ("مرحبا؟ كيف حالك.", ["مرحبا؟", "كيف حالك."]),
        ("  leading space. trailing space.   ", ["leading space.", "trailing space."]),
        ("Only this. ... Then more.", ["Only this.", "Then more."]),  # pieces with nothing to say are dropped
        ("No terminator at all", ["No terminator at all"]),
    ],
)
def test_sentences(text, expected):
    assert units(text) == expected


def test_clauses_merge_short_ones():
    text = "Well, I think so, but maybe not; who knows: nobody. Yes, sure."
    assert units(text, granularity=Granularity.CLAUSE) == ["Well, I think so,", "but maybe not;", "who knows: nobody.", "Yes, sure."]
    assert units("一二三四五六七八九十，一二三四五六七八九十、好。", granularity=Granularity.CLAUSE, min_clause_chars=5) == [
        "一二三四五六七八九十，",
        "一二三四五六七八九十、",
        "好。",
    ]


def test_auto_cuts_a_long_sentence_after_a_short_one_at_a_clause():
    text = "Of course! To make a simple tomato sauce, heat two tablespoons of olive oil in a pan over medium heat. Done."
    assert units(text) == [
        "Of course!",
        "To make a simple tomato sauce,",  # the listener hears this while the rest is still arriving
        "heat two tablespoons of olive oil in a pan over medium heat.",
        "Done.",
    ]
    assert units(text, granularity=Granularity.SENTENCE)[1].endswith("medium heat.")
    splitter = SentenceSplitter(idle_flush_s=None)
    splitter.feed("Yes. ")
    splitter.flush()  # a new turn: no unit before it to compare with
    long_sentence = "After the flush the first sentence may be long, as long as it likes to be."
    assert [u.text for u in splitter.feed(long_sentence + " ")] == [long_sentence]


LONG_FIRST = (
    "The lighthouse stood on a rock at the edge of the bay, and for more than a hundred years its keeper had climbed "
    "the same spiral stairs every evening to light the lamp. The last keeper was a patient woman named Ruth."
)


def test_auto_cuts_a_long_first_sentence_at_a_clause_else_a_space():
    assert units(LONG_FIRST) == [
        "The lighthouse stood on a rock at the edge of the bay,",  # the first audio waits for this clause only
        "and for more than a hundred years its keeper had climbed the same spiral stairs every evening to light the lamp.",
        "The last keeper was a patient woman named Ruth.",
    ]
    assert units(LONG_FIRST, granularity=Granularity.SENTENCE)[0].endswith("light the lamp.")  # asked for: whole sentences
    no_clause = "Building a small garden on a city balcony takes less space than most people think. " + "Start by watching " * 6
    # no clause mark: cut at a space, shorter still (no natural pause is worth the wait)
    assert units(no_clause)[:2] == ["Building a small garden on a city balcony takes", "less space than most people think."]
    # the tail of the cut sentence counts as its whole sentence: the next one is not cut after it
    assert units(no_clause)[2] == ("Start by watching " * 6).strip()
    medium = "To reset your password, open the settings page and choose security. Enter the code."
    assert units(medium)[0] == "To reset your password, open the settings page and choose security."  # 67: no tail of one word


def test_clause_units_start_a_turn_short_too():
    no_clause = "Building a small garden on a city balcony takes less space than most people think, and it pays. Then rest."
    assert units(no_clause, granularity=Granularity.CLAUSE) == [
        "Building a small garden on a city balcony takes",  # a long first clause would hold back the first audio
        "less space than most people think,",
        "and it pays.",
        "Then rest.",
    ]
    later = "Yes. " + no_clause
    assert units(later, granularity=Granularity.CLAUSE)[1] == "Building a small garden on a city balcony takes less space than most people think,"
    assert units(no_clause, granularity=Granularity.SENTENCE)[0].endswith("and it pays.")  # asked for: whole sentences


def test_every_turn_starts_with_a_short_unit():
    splitter = SentenceSplitter(idle_flush_s=None)
    assert [u.text for u in splitter.feed(LONG_FIRST)][:1] == ["The lighthouse stood on a rock at the edge of the bay,"]
    splitter.flush()
    assert [u.text for u in splitter.feed(LONG_FIRST)][:1] == ["The lighthouse stood on a rock at the edge of the bay,"]
    splitter.feed("A sentence that is cleared")
    splitter.clear()
    assert [u.text for u in splitter.feed(LONG_FIRST)][:1] == ["The lighthouse stood on a rock at the edge of the bay,"]


def test_a_long_first_sentence_is_cut_the_same_whatever_the_pieces():
    whole = fed_in_pieces(LONG_FIRST, [])
    rng = random.Random(7)
    for _ in range(100):
        assert fed_in_pieces(LONG_FIRST, rng.sample(range(1, len(LONG_FIRST)), rng.randint(1, 40))) == whole
    assert fed_in_pieces(LONG_FIRST, list(range(1, len(LONG_FIRST)))) == whole
    splitter = SentenceSplitter(idle_flush_s=None)
    first = LONG_FIRST.index(",") + 1
    assert splitter.feed(LONG_FIRST[:80]) == []  # a sentence end may still come within AUTO_FIRST_WHOLE_CHARS
    assert [u.text for u in splitter.feed(LONG_FIRST[80:82])] == [LONG_FIRST[:first]]


def test_none_granularity_waits_for_the_flush():
    splitter = SentenceSplitter(granularity=Granularity.NONE)
    assert splitter.feed("One. Two. ", now=0.0) == []
    assert splitter.idle_deadline() is None
    assert [u.text for u in splitter.flush()] == ["One. Two."]


def test_max_unit_length_cuts_at_a_clause_then_a_space():
    text = "word " * 30
    cut = units(text, max_unit_chars=52)
    assert all(len(u) <= 52 for u in cut) and " ".join(cut) == text.strip()
    clause = "one two three four five six seven, eight nine ten eleven twelve thirteen"
    assert units(clause, max_unit_chars=50)[0] == "one two three four five six seven,"
    assert units("x" * 25, max_unit_chars=10) == ["x" * 10, "x" * 10, "x" * 5]  # no space: cut at the limit


def test_a_terminator_at_the_end_waits_for_the_next_text():
    splitter = SentenceSplitter(idle_flush_s=None)
    assert splitter.feed("Hello.") == []  # "Hello.World" would not split
    assert [u.text for u in splitter.feed(" W")] == ["Hello."]
    assert splitter.feed("ait, etc.") == []
    assert splitter.feed(" ") == []  # "etc." ends a sentence only before a capital
    assert [u.text for u in splitter.feed("Then")] == ["Wait, etc."]
    assert splitter.buffered == "Then"


def test_offsets_point_into_everything_fed():
    splitter = SentenceSplitter(idle_flush_s=None)
    fed = ""
    found: list[TextUnit] = []
    for piece in ["  First one.", " Sec", "ond, unfinished"]:
        fed += piece
        found += splitter.feed(piece)
    splitter.clear()
    fed += "dropped"
    found += splitter.feed("dropped")
    assert found == [TextUnit("First one.", 2, 12)]
    splitter.clear()
    fed += " Third."
    found += splitter.feed(" Third.") + splitter.flush()
    assert [fed[u.start : u.end] for u in found] == [u.text for u in found] == ["First one.", "Third."]
    assert splitter.fed_chars == len(fed)


def test_idle_flush():
    splitter = SentenceSplitter(idle_flush_s=0.5)
    assert splitter.idle_deadline() is None
    assert splitter.feed("Half a sent", now=10.0) == []
    assert splitter.idle_deadline() == 10.5
    assert splitter.poll(10.4) == []
    assert splitter.feed("ence", now=10.4) == []
    assert splitter.poll(10.8) == []
    assert [u.text for u in splitter.poll(10.9)] == ["Half a sentence"]
    assert splitter.idle_deadline() is None
    assert SentenceSplitter(idle_flush_s=0).feed("x", now=1.0) == [] and SentenceSplitter(idle_flush_s=0).idle_deadline() is None


TRICKY = (
    'Dr. Smith said: "It costs 3.14 dollars, i.e. a lot." Really?! Visit example.com... or not. '
    "See No. 7 and Fig. 2, etc. The U.S. team won at 5 p.m. today. 1. First. 2. Second. "
    "你好。「世界！」 Это тест. مرحبا؟ " + "long " * 70 + "end."
)


@pytest.mark.parametrize("granularity", [Granularity.AUTO, Granularity.SENTENCE, Granularity.CLAUSE])
def test_any_split_gives_the_units_of_the_whole_text(granularity):
    whole = fed_in_pieces(TRICKY, [], granularity=granularity, max_unit_chars=120)
    assert len(whole) > 10
    rng = random.Random(6)
    for _ in range(200):
        cuts = rng.sample(range(1, len(TRICKY)), rng.randint(1, 60))
        assert fed_in_pieces(TRICKY, cuts, granularity=granularity, max_unit_chars=120) == whole
    # character by character, the hardest case
    assert fed_in_pieces(TRICKY, list(range(1, len(TRICKY))), granularity=granularity, max_unit_chars=120) == whole


def test_tentative_unit_is_the_one_the_next_text_confirms():
    splitter = SentenceSplitter(idle_flush_s=None)
    assert splitter.feed("Hello there") == [] and splitter.tentative() is None  # no sentence end yet
    assert splitter.feed(".") == []
    guess = splitter.tentative()
    assert guess == TextUnit("Hello there.", 0, 12)
    assert splitter.feed(" Next") == [guess]  # confirmed
    splitter.feed(" is example.")
    assert splitter.tentative() == TextUnit("Next is example.", 13, 29)
    assert splitter.feed("com") == []  # contradicted: no unit
    assert splitter.tentative() is None
    splitter.feed(' he said "Stop!')
    assert splitter.tentative().text == 'Next is example.com he said "Stop!'
    splitter.feed('"')
    assert splitter.tentative().text == 'Next is example.com he said "Stop!"'  # the closing quote joins it
    assert splitter.feed(" ") == [TextUnit('Next is example.com he said "Stop!"', 13, 48)]
    assert SentenceSplitter(granularity=Granularity.NONE).tentative() is None


def test_fed_character_by_character_every_sentence_was_guessed_before_it_was_confirmed():
    splitter = SentenceSplitter(idle_flush_s=None, max_unit_chars=120)
    guessed, missed = 0, []
    guess = None
    for ch in TRICKY:
        for unit in splitter.feed(ch):
            if unit == guess:
                guessed += 1
            else:
                missed.append(unit.text)
        guess = splitter.tentative()
    assert missed and all(text.startswith("long long") for text in missed)  # only the forced cuts of the run-on "sentence"
    assert guessed == len(fed_in_pieces(TRICKY, [], max_unit_chars=120)) - len(missed) - 1  # all but the last, flushed
