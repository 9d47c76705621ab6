"""The kinds of stage a pipeline is made of.

Only the utterance kind exists so far: a whole unit of text in, its audio out
piece by piece. Autoregressive and chunked stages join it with the stage runtime.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from vocalis.stages.request import SynthesisRequest


class UtteranceStage(Protocol):
    """Turns one request's text into audio, yielding each piece as soon as it exists."""

    name: str

    def synthesize(self, request: SynthesisRequest) -> Iterator[np.ndarray]:
        """Yield mono float32 chunks at the model's rate; stop early if the request is cancelled."""
        ...
