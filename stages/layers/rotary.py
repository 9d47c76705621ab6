"""Rotary position embeddings: plain RoPE, Qwen's multimodal M-RoPE, MiniCPM's LongRoPE and llama3 frequency scaling.

Every function returns (cos, sin) of shape [..., head_dim] with both halves repeated, in float32, for
`apply_rotary` (the rotate-half convention all served checkpoints use).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch


def inverse_frequencies(head_dim: int, theta: float, device: torch.device | None = None) -> torch.Tensor:
    """[head_dim / 2] rotation speed of each pair of channels."""
    return 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)


def llama3_inverse_frequencies(
    inv_freq: torch.Tensor, factor: float, low_freq_factor: float, high_freq_factor: float, original_max_position: int
) -> torch.Tensor:
    """Llama 3's rope scaling: long wavelengths slowed by `factor`, short ones kept, a smooth blend between."""
    low_wavelen = original_max_position / low_freq_factor
    high_wavelen = original_max_position / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_max_position / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled)


def _cos_sin(angles: torch.Tensor, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.cat([angles, angles], dim=-1)
    if scale == 1.0:
        return angles.cos(), angles.sin()
    return angles.cos() * scale, angles.sin() * scale


def rope(positions: torch.Tensor, head_dim: int, theta: float, inv_freq: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [..., head_dim] at integer positions [...]; `inv_freq` overrides the plain frequencies (llama3)."""
    inv = inverse_frequencies(head_dim, theta, positions.device) if inv_freq is None else inv_freq.to(positions.device)
    return _cos_sin(positions[..., None].float() * inv)


def mrope(
    positions: torch.Tensor, head_dim: int, theta: float, sections: Sequence[int], interleaved: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """M-RoPE cos, sin [T, head_dim] from positions [3, T] (temporal, height, width).

    Each frequency takes its angle from one of the three position rows: the interleaved layout cycles t, h, w over
    frequencies (up to each section's share); the plain one gives each row a contiguous block. Text tokens use one
    position in all three rows, which makes this equal to ordinary RoPE; it is written out so that a checkpoint's
    sections are honoured.
    """
    inv = inverse_frequencies(head_dim, theta, positions.device)
    angles = positions[:, :, None].float() * inv  # [3, T, D/2]
    rows = len(sections)
    if interleaved:
        chosen = angles[0].clone()
        for row, size in enumerate(sections[1:], start=1):
            chosen[..., row : size * rows : rows] = angles[row, ..., row : size * rows : rows]
    else:
        parts, start = [], 0
        for row, size in enumerate(sections):
            parts.append(angles[row % 3, ..., start : start + size])
            start += size
        chosen = torch.cat(parts, dim=-1)
    return _cos_sin(chosen)


class LongRoPE:
    """MiniCPM's LongRoPE: each frequency divided by a per-channel factor, cos/sin scaled for the extended range.

    The factor set is fixed by the configuration, not by the sequence: the long factors (and the attention scaling
    that goes with them) apply once `max_position` exceeds `original_max_position`.
    """

    def __init__(self, head_dim: int, theta: float, short_factor: Sequence[float], long_factor: Sequence[float],
                 max_position: int, original_max_position: int) -> None:
        self.inv_freq = inverse_frequencies(head_dim, theta)
        factors = long_factor if max_position > original_max_position else short_factor
        if len(factors) != head_dim // 2:
            raise ValueError(f"rope_scaling factors have {len(factors)} values; head size {head_dim} needs {head_dim // 2}")
        self.ext_factors = torch.tensor(factors, dtype=torch.float32)
        self.scaling = math.sqrt(1 + math.log(max_position / original_max_position) / math.log(original_max_position))

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, head_dim] (float32) at positions [T]."""
        t = positions.to(torch.float32).cpu()
        cos, sin = _cos_sin(torch.outer(t, 1.0 / self.ext_factors) * self.inv_freq, self.scaling)
        return cos.to(positions.device), sin.to(positions.device)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, upcast: bool = False) -> torch.Tensor:
    """x [..., D] rotated by cos/sin [..., D] (broadcast over x's leading dims).

    `upcast`: rotate in float32 and cast back (MiniCPM); otherwise cos/sin are cast to x's dtype first (Qwen3).
    Partial rotary (Qwen3.5): when cos/sin cover fewer channels than x, only the first ones rotate, the rest pass.
    """
    rotary_dim = cos.shape[-1]
    if rotary_dim < x.shape[-1]:
        return torch.cat([apply_rotary(x[..., :rotary_dim], cos, sin, upcast), x[..., rotary_dim:]], dim=-1)
    if upcast:
        xf = x.float()
        cos, sin = cos.to(x.device, torch.float32), sin.to(x.device, torch.float32)
        return (xf * cos + rotate_half(xf) * sin).to(x.dtype)
    cos, sin = cos.to(x.device, x.dtype), sin.to(x.device, x.dtype)
    return x * cos + rotate_half(x) * sin


def interleaved_rope(positions: torch.Tensor, head_dim: int, theta: float,
                     table_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [..., T, head_dim / 2] (float32) for `apply_interleaved_rotary`, at integer positions [..., T] (a
    leading batch dimension: each row at its own positions).

    `table_dtype`: round the table through this dtype first, as implementations that store it as a buffer do
    (fish-speech keeps its `freqs_cis` in bfloat16)."""
    angles = positions[..., None].float() * inverse_frequencies(head_dim, theta, positions.device)
    cos, sin = angles.cos(), angles.sin()
    if table_dtype is not None:
        cos, sin = cos.to(table_dtype).float(), sin.to(table_dtype).float()
    return cos, sin


def apply_interleaved_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., T, H, D] rotated pairwise (channels 2i, 2i+1: the GPT-J / complex-number convention) by cos/sin
    [T, D / 2] (or [B, T, D / 2], per row of a batch), in float32, cast back to x's dtype."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[..., None, :].to(x.device), sin[..., None, :].to(x.device)
    out = torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1)
    return out.flatten(-2).to(x.dtype)


class StepTable:
    """The (cos, sin) of positions [0, length), made once per device and dtype by `make(positions)` and sliced for
    each step: for a small decoder that steps through the same few positions for every frame (Qwen3-TTS's code
    predictor, Fish's fast AR), where making the rows again each step costs more than rotating by them. A row is
    the one `make` gives for that position alone, bit for bit (tested); positions past `length` are made as asked."""

    def __init__(self, make: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]], length: int) -> None:
        self.make, self.length = make, length
        self._tables: dict[tuple[torch.device, torch.dtype | None], tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, start: int, count: int, device: torch.device,
                 dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows start .. start + count - 1, cast to `dtype` (None: as `make` gives them)."""
        if start + count > self.length:
            cos, sin = self.make(torch.arange(start, start + count, device=device))
            return (cos, sin) if dtype is None else (cos.to(dtype), sin.to(dtype))
        table = self._tables.get((device, dtype))
        if table is None:
            cos, sin = self.make(torch.arange(self.length, device=device))
            table = self._tables[(device, dtype)] = (cos, sin) if dtype is None else (cos.to(dtype), sin.to(dtype))
        return table[0][start : start + count], table[1][start : start + count]
