"""Drama 3's tags carried across units: the fold the session applies, unit by unit, over a split text."""

from __future__ import annotations

import pytest

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.drama3.prompt import check_text
from vocalis.stages.models.drama3.tag_carry import TagCarry


def fold(units: list[str]) -> tuple[list[str], str]:
    carry, context, texts = TagCarry(), "", []
    for unit in units:
        carried = carry.unit(context, unit)
        texts.append(carried.text)
        context = carried.context
    return texts, context


def test_the_last_speaker_reaches_untagged_units():
    texts, context = fold(["<|speaker:3|>Hello there.", "How are you?", "<|speaker:7|> Fine. <|speaker:2|> Good.", "Bye."])
    assert texts == ["<|speaker:3|>Hello there.", "<|speaker:3|> How are you?", "<|speaker:7|> Fine. <|speaker:2|> Good.",
                     "<|speaker:2|> Bye."]
    assert context == "<|speaker:2|>"
    assert fold(["Hello.", "Bye."])[0] == ["Hello.", "Bye."]  # no tag: the prompt builder's speaker 0


def test_an_open_whisper_is_closed_per_unit_and_opened_again():
    texts, context = fold(["<|speaker:1|> <whisper>One.", "Two.", "<|speaker:4|> Three.</whisper> Four."])
    assert texts == ["<|speaker:1|> <whisper>One.</whisper>", "<|speaker:1|> <whisper>Two.</whisper>",
                     "<|speaker:4|> <whisper>Three.</whisper> Four."]
    assert context == "<|speaker:4|>"
    for text in texts:
        check_text(text, "input")  # each prompt on its own is well formed
    TagCarry().end(context)


def test_an_unclosed_whisper_at_the_end_is_refused_and_misplaced_tags_reach_the_builder():
    _, context = fold(["<whisper>One.", "Two."])
    with pytest.raises(InvalidField, match="without its closing"):
        TagCarry().end(context)
    texts, _ = fold(["<whisper>One.", "<whisper>Two.</whisper>"])  # opened again: the builder refuses it
    with pytest.raises(ValueError, match="opened again"):
        check_text(texts[1], "input")
