"""Drama 3's tags across the units of a session: the last speaker tag and an open `<whisper>` reach the next unit.

The reference server builds one prompt per request, so `<|speaker:3|>Hello there. How are you?` is speaker 3 to the
end and `<whisper>One. Two.</whisper>` whispers both. Here each unit has its own prompt: a unit that does not lead
with a speaker tag gets the last one before it (`<|speaker:N|> ` in front, as the prompt builder writes speaker 0),
a unit inside a whisper opens it again after its leading tag, and a whisper still open at a unit's end is closed
there and carried on. The context is the speaker tag (or "") and `<whisper>` when one is open.
"""

from __future__ import annotations

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.drama3.prompt import SPEAKER_TAG, WHISPER, WHITE_SPACE
from vocalis.stages.text.text_carry import CarriedUnit

OPEN = "<whisper>"
CLOSE = "</whisper>"


def _split_context(context: str) -> tuple[str, bool]:
    whispering = context.endswith(OPEN)
    return (context[: -len(OPEN)] if whispering else context), whispering


class TagCarry:
    """The `text_carry` of the Drama 3 adapter (stages/text/text_carry.py)."""

    def unit(self, context: str, text: str) -> CarriedUnit:
        speaker, whispering = _split_context(context)
        body = text.lstrip(WHITE_SPACE)
        lead = SPEAKER_TAG.match(body)
        if lead is not None:
            rest = body[lead.end():]
            head = lead[0] + rest[: len(rest) - len(rest.lstrip(WHITE_SPACE))]
            rest = rest.lstrip(WHITE_SPACE)
        else:
            head, rest = (f"{speaker} " if speaker else ""), body
        tags = list(SPEAKER_TAG.finditer(text))
        if tags:
            speaker = tags[-1][0]
        open_now = whispering
        for tag in WHISPER.finditer(text):
            open_now = tag[0] == OPEN  # a misplaced tag is left for the prompt builder to refuse
        model_text = head + (OPEN if whispering else "") + rest + (CLOSE if open_now else "")
        return CarriedUnit(model_text, speaker + (OPEN if open_now else ""))

    def end(self, context: str) -> None:
        if _split_context(context)[1]:
            raise InvalidField("input", "INVALID_VALUE", "input: <whisper> without its closing </whisper>")
