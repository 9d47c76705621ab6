"""Audio clean-up around the model: silence trimming, loudness, fades and padding.

The reference implementation trims a reference clip's silences before encoding it, and
levels, fades and pads what it generates. Codes match only if the trimmed clip matches
sample for sample, so trimming follows the same rules on the same 16-bit samples: loudness
is the integer RMS of 16-bit audio in dBFS, measured over millisecond windows, and a cut at
the end of the audio is padded with zeros to a whole millisecond.
"""

from __future__ import annotations

import math

import numpy as np

SILENCE_DBFS = -50.0
SEEK_MS = 10
FULL_SCALE = 32768.0


def to_pcm16(audio: np.ndarray) -> np.ndarray:
    return (np.asarray(audio, dtype=np.float32) * 32768.0).clip(-32768, 32767).astype(np.int16)


def from_pcm16(pcm: np.ndarray) -> np.ndarray:
    return pcm.astype(np.float32) / 32768.0


class _Clip:
    """16-bit mono samples addressed in milliseconds."""

    def __init__(self, pcm: np.ndarray, rate: int) -> None:
        self.pcm = pcm
        self.rate = rate

    def __len__(self) -> int:
        return round(1000 * (len(self.pcm) / self.rate))

    def _frame(self, ms: float) -> int:
        if ms < 0:
            ms = len(self) - abs(ms)
        return int(ms * (self.rate / 1000.0))

    def cut(self, start: float = 0, end: float | None = None) -> _Clip:
        length = len(self)
        start = min(start, length)
        end = length if end is None else min(end, length)
        first, last = self._frame(start), self._frame(end)
        data = self.pcm[first:last]
        missing = (last - first) - len(data)
        if missing > 0:
            data = np.concatenate([data, np.zeros(missing, dtype=np.int16)])
        return _Clip(data, self.rate)

    def rms(self) -> int:
        if len(self.pcm) == 0:
            return 0
        return int(math.sqrt(float(np.sum(self.pcm.astype(np.int64) ** 2)) / len(self.pcm)))

    def dbfs(self) -> float:
        rms = self.rms()
        return -math.inf if rms == 0 else 20 * math.log10(rms / FULL_SCALE)


def _silent_ranges(clip: _Clip, min_ms: int, threshold_db: float, step: int) -> list[list[int]]:
    length = len(clip)
    if length < min_ms:
        return []
    threshold = 10 ** (threshold_db / 20) * FULL_SCALE
    last = length - min_ms
    starts = list(range(0, last + 1, step))
    if last % step:
        starts.append(last)
    silent = [i for i in starts if clip.cut(i, i + min_ms).rms() <= threshold]
    if not silent:
        return []
    ranges = []
    previous = range_start = silent[0]
    for start in silent[1:]:
        if start != previous + step and start > previous + min_ms:
            ranges.append([range_start, previous + min_ms])
            range_start = start
        previous = start
    ranges.append([range_start, previous + min_ms])
    return ranges


def _voiced_ranges(clip: _Clip, min_ms: int, threshold_db: float, step: int) -> list[list[int]]:
    silent = _silent_ranges(clip, min_ms, threshold_db, step)
    length = len(clip)
    if not silent:
        return [[0, length]]
    if silent[0][0] == 0 and silent[0][1] == length:
        return []
    voiced, previous_end = [], 0
    for start, end in silent:
        voiced.append([previous_end, start])
        previous_end = end
    if silent[-1][1] != length:
        voiced.append([previous_end, length])
    if voiced[0] == [0, 0]:
        voiced.pop(0)
    return voiced


def _leading_silence_ms(clip: _Clip, threshold_db: float, chunk_ms: int = SEEK_MS) -> int:
    trim = 0
    while clip.cut(trim, trim + chunk_ms).dbfs() < threshold_db and trim < len(clip):
        trim += chunk_ms
    return min(trim, len(clip))


def remove_silence(audio: np.ndarray, rate: int, mid_ms: int, lead_ms: int, trail_ms: int) -> np.ndarray:
    """Shorten pauses longer than mid_ms to mid_ms (0: keep them), and keep only lead_ms / trail_ms of edge silence."""
    clip = _Clip(to_pcm16(audio), rate)
    if mid_ms > 0:
        ranges = [[start - mid_ms, end + mid_ms] for start, end in _voiced_ranges(clip, mid_ms, SILENCE_DBFS, SEEK_MS)]
        for before, after in zip(ranges, ranges[1:], strict=False):
            if after[0] < before[1]:  # a short pause is shared between its neighbours
                before[1] = after[0] = (before[1] + after[0]) // 2
        pieces = [clip.cut(max(start, 0), min(end, len(clip))).pcm for start, end in ranges]
        clip = _Clip(np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int16), rate)
    start = max(0, _leading_silence_ms(clip, SILENCE_DBFS) - lead_ms)
    clip = clip.cut(start)
    reversed_clip = _Clip(clip.pcm[::-1].copy(), rate)
    start = max(0, _leading_silence_ms(reversed_clip, SILENCE_DBFS) - trail_ms)
    clip = _Clip(reversed_clip.cut(start).pcm[::-1].copy(), rate)
    return from_pcm16(clip.pcm)


def level(audio: np.ndarray, ref_rms: float | None) -> np.ndarray:
    """Loudness of generated audio: a quiet reference's level when cloning one, else peak 0.5."""
    if ref_rms is not None:
        return audio * ref_rms / 0.1 if ref_rms < 0.1 else audio
    peak = float(np.abs(audio).max()) if audio.size else 0.0
    return audio / peak * 0.5 if peak > 1e-6 else audio


def fade(audio: np.ndarray, samples: int) -> np.ndarray:
    """Linear fade-in and fade-out over `samples` (at most half the audio each)."""
    out = np.array(audio, dtype=np.float32, copy=True)
    k = min(samples, len(out) // 2)
    if k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    return out
