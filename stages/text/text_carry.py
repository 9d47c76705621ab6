"""A family's optional hook for inline tags whose reach spans sentences (a speaker tag, an open `<whisper>`).

The server speaks a session's text one unit (sentence) at a time, each with its own prompt; a model whose reference
server reads the whole request as one prompt sees a tag at the start of a request govern every sentence after it.
A family keeps that meaning by giving its LoadedModel a `text_carry`: the session folds it over the units in
order, each unit's text rewritten with what the text before it left open (`context`), and checks at the end of the
input that nothing is left open. Only committed units advance the context: a tentative unit (a guess the next text
may contradict) is rewritten from the committed context and advances it only once confirmed, so how the text
arrives does not change what the model is given. A Clear starts the context afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CarriedUnit:
    text: str
    """The unit's text as the model is given it."""
    context: str
    """What the next unit starts from (opaque to the session; "" at the start of a session)."""


class TextCarry(Protocol):
    def unit(self, context: str, text: str) -> CarriedUnit:
        """`text` (one unit) rewritten for the model after text that left `context` open."""
        ...

    def end(self, context: str) -> None:
        """The input ended with `context` left open: raise a RequestError if that is not allowed."""
        ...
