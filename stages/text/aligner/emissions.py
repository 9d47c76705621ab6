"""A unit's CTC emissions computed in windows while its audio is still being made.

Aligning only after a unit's last audio would run the acoustic model over the whole unit then.
Instead, each window of WINDOW_S is computed as soon as CONTEXT_S of audio beyond it exists,
with CONTEXT_S on each side for the model to see (then dropped), so that after the
last audio only the last window is left. A unit shorter than one window and its right context is
computed whole, exactly as in one pass. The frames are those of one pass: window edges fall on
multiples of the model's frame stride.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import soxr

WINDOW_S = 1.0
"""Audio per window."""
CONTEXT_S = 0.5
"""Audio the model sees on each side of a window."""


def conv_frames(samples: int, kernels: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Frames the convolution stack makes of `samples` inputs."""
    for kernel, stride in zip(kernels, strides, strict=True):
        samples = (samples - kernel) // stride + 1 if samples >= kernel else 0
    return max(samples, 0)


class WindowedEmissions:
    """The emissions of one unit, from its audio at `rate` given piece by piece."""

    def __init__(
        self,
        log_probs: Callable[[np.ndarray], np.ndarray],
        rate: int,
        model_rate: int,
        kernels: tuple[int, ...],
        strides: tuple[int, ...],
    ) -> None:
        self._log_probs = log_probs
        self._kernels, self._strides = kernels, strides
        self._stride = int(np.prod(strides))
        receptive = 1
        for kernel, stride in zip(reversed(kernels), reversed(strides), strict=True):
            receptive = (receptive - 1) * stride + kernel
        self._extra = receptive - self._stride
        self.window = max(1, round(WINDOW_S * model_rate / self._stride))
        """Frames per window."""
        self.context = max(1, round(CONTEXT_S * model_rate / self._stride))
        self._resampler = soxr.ResampleStream(rate, model_rate, 1, dtype="float32") if rate != model_rate else None
        self._pieces: list[np.ndarray] = []
        self._audio = np.zeros(0, dtype=np.float32)
        self._done: list[np.ndarray] = []
        self.frames_done = 0

    def feed(self, samples: np.ndarray) -> None:
        """More audio of the unit; computes every window whose right context has now arrived."""
        self._take(samples, last=False)
        limit = len(self._audio) // self._stride - self.context  # frames whose right context has arrived
        while self.frames_done + self.window <= limit:
            self._compute(self.frames_done + self.window)

    def finish(self) -> np.ndarray:
        """All the unit's emissions [frames, vocab], computing what is left."""
        self._take(np.zeros(0, dtype=np.float32), last=True)
        total = conv_frames(len(self._audio), self._kernels, self._strides)
        if self.frames_done < total:
            self._compute(total, to_end=True)
        return np.concatenate(self._done) if self._done else np.zeros((0, 0), dtype=np.float32)

    def _take(self, samples: np.ndarray, last: bool) -> None:
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(np.asarray(samples, dtype=np.float32), last=last)
        if len(samples):
            self._audio = np.concatenate([self._audio, samples])

    def _compute(self, end: int, to_end: bool = False) -> None:
        start = self.frames_done
        first = max(0, start - self.context)
        s0 = first * self._stride
        s1 = len(self._audio) if to_end else min(len(self._audio), (end + self.context) * self._stride + self._extra)
        frames = self._log_probs(self._audio[s0:s1])
        self._done.append(frames[start - first : end - first])
        self.frames_done = end
