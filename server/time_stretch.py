"""Pitch-preserving speed change, as a stream: for models that have no speed of their own.

Sonic (libsonic, a Rust port of Bill Cox's Sonic, the speed changer of eSpeak and ExoPlayer)
finds the pitch period of voiced speech and drops or repeats whole periods, so pitch
and timbre stay and only the rate of speech changes. It keeps a few pitch periods
(tens of milliseconds) in hand; flush() gives them back, at the end of each utterance.
Any chunking gives the same audio as one block.
"""

from __future__ import annotations

import numpy as np
from libsonic import SonicStream

MIN_SPEED = 0.25
MAX_SPEED = 4.0


class TimeStretch:
    """Play mono float audio `speed` times faster (2.0: half the duration), pitch unchanged."""

    def __init__(self, rate: int, speed: float) -> None:
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed must be from {MIN_SPEED} to {MAX_SPEED}, got {speed:g}")
        self.rate = rate
        self.speed = speed
        self._sonic = SonicStream(rate, 1)
        self._sonic.set_speed(speed)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """Take samples; return the stretched samples ready so far."""
        if len(samples):
            self._sonic.write(np.ascontiguousarray(samples, dtype=np.float32))
        return self._read()

    def flush(self) -> np.ndarray:
        """Return what is still held, as if the audio ended here (an utterance's end); more may follow."""
        self._sonic.flush()
        return self._read()

    finish = flush

    def _read(self) -> np.ndarray:
        ready = self._sonic.available_frames()
        if not ready:
            return np.zeros(0, np.float32)
        return np.asarray(self._sonic.read(ready), dtype=np.float32)
