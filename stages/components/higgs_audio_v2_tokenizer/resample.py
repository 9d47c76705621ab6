"""Band-limited resampling by a Hann-windowed sinc, as the reference resamples reference clips.

The audio tokenizer's semantic branch hears 16 kHz audio, and reference clips come at any rate;
codes match the reference's only if the resampled samples do, so this follows the same
polyphase construction (windowed sinc with 6 zero crossings, roll-off 0.99): one filter per
output phase, applied as a strided convolution. The kernel is computed in the waveform's dtype.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F

ZERO_CROSSINGS = 6
ROLLOFF = 0.99


@lru_cache(maxsize=16)
def _kernel(orig: int, new: int, dtype: torch.dtype) -> tuple[torch.Tensor, int]:
    """Filters [new, 1, taps] for rates already divided by their gcd, and the one-sided width."""
    cutoff = min(orig, new) * ROLLOFF
    width = math.ceil(ZERO_CROSSINGS * orig / cutoff)
    taps = torch.arange(-width, width + orig, dtype=dtype)[None, None] / orig
    phases = torch.arange(0, -new, -1, dtype=dtype)[:, None, None] / new
    t = (phases + taps) * cutoff
    t = t.clamp(-ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = torch.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.tensor(1.0, dtype=dtype), t.sin() / t)
    return sinc * (window * (cutoff / orig)), width


def resample(waveform: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """Resample [..., N] samples from orig_rate to new_rate (ceil(N * new / orig) samples out)."""
    if orig_rate == new_rate:
        return waveform
    gcd = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // gcd, int(new_rate) // gcd
    kernel, width = _kernel(orig, new, waveform.dtype)
    shape = waveform.shape
    flat = waveform.reshape(-1, shape[-1])
    length = flat.shape[-1]
    padded = F.pad(flat, (width, width + orig))
    out = F.conv1d(padded[:, None], kernel.to(waveform.device), stride=orig)
    out = out.transpose(1, 2).reshape(flat.shape[0], -1)
    out = out[..., : math.ceil(new * length / orig)]
    return out.reshape(*shape[:-1], out.shape[-1])
