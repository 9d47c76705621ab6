"""Which weight quantisations a stage may ask for, and which stages a family's loader actually quantised.

`quantize` is a per-stage deploy setting (stages/runtime/deploy.py). A family's loader applies it to the stage's
modules (stages/layers/int8_linear.py) and notes the stage here; `load_model` records the notes around the load and
refuses a model whose config asks to quantise a stage its family does not quantise, naming the stage, rather than
serving it in float silently. Torch-free: the Piper-only install imports it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

QUANTIZE_CHOICES = ("none", "int8-dynamic")
"""none: the stage's weights in its `dtype`. int8-dynamic: every nn.Linear of the stage's generator holds int8
weights (symmetric, one scale per output channel) and quantises its input per row at each call (int8 x int8 -> int32
matmul, rescaled to the stage's dtype). Embeddings, norms and convolutions keep the stage's dtype."""

_applied: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("quantized_stages", default=None)


def note_quantized(stage_name: str) -> None:
    """Called by the code that quantised `stage_name`'s modules."""
    applied = _applied.get()
    if applied is not None:
        applied.add(stage_name)


@contextmanager
def recording() -> Iterator[set[str]]:
    """The names of the stages quantised while the block runs (a model's load)."""
    applied: set[str] = set()
    token = _applied.set(applied)
    try:
        yield applied
    finally:
        _applied.reset(token)


def unapplied(requested: dict[str, str], applied: set[str]) -> list[str]:
    """The stages whose deploy asked for a quantisation (`requested`: stage name -> choice) that was not applied."""
    return [name for name, choice in requested.items() if choice != "none" and name not in applied]
