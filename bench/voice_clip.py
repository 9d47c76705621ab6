"""The voice every bench's clone request copies, and the voice every other request names: one place for both, so
that the benches and their reference sides ask for the same thing.

The clip is 3 s of a 180 Hz tone, amplitude-modulated at 3 Hz, with a transcript. numpy only at import: the
reference packages' venvs, which run some of these scripts too, have no vocalis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vocalis.stages.api.model import LoadedModel
    from vocalis.stages.runtime.request import ReferenceAudio

REF_TEXT = "A short reference clip for the voice."
REF_RATE = 24000


def reference_clip() -> np.ndarray:
    """The clip's samples (float32 at REF_RATE)."""
    t = np.arange(REF_RATE * 3) / REF_RATE
    return (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def reference_audio() -> ReferenceAudio:
    """The clip as a request's reference (vocalis' ReferenceAudio), with its transcript."""
    from vocalis.stages.runtime.request import ReferenceAudio

    return ReferenceAudio(reference_clip(), REF_RATE, text=REF_TEXT)


def bench_voice(model: LoadedModel, clone: bool) -> str:
    """The voice a bench request names: none for a clone (the reference speaks), else the model's default, or its
    first preset where it has no default."""
    if clone:
        return ""
    return model.adapter.resolve_voice("") or next(iter(model.capabilities.voices), "")
