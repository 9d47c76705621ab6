"""RAS's four settings (`ras_sampling`'s arguments in a CosyVoice or GLM-TTS yaml), torch-free so that a family's
config can read them (`ras_sampling.py` samples with them)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RASParams:
    top_p: float = 0.8
    top_k: int = 25
    win_size: int = 10
    tau_r: float = 0.1

    @property
    def repeats_to_redraw(self) -> int:
        """The least count in the window that redraws: a count n (an integer) is >= win_size * tau_r exactly when
        it is >= this, so the device compares integers and no float rounding moves the threshold."""
        return math.ceil(self.win_size * self.tau_r)
