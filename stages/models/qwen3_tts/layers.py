"""Building blocks shared by the talker, the code predictor and the codec transformers."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class GatedMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def inverse_frequencies(head_dim: int, theta: float, device: torch.device | None = None) -> torch.Tensor:
    return 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)


def rotary(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [..., D] at integer positions [...] (both halves repeated, for rotate_half)."""
    angles = positions[..., None].float() * inverse_frequencies(head_dim, theta, positions.device)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def multimodal_rotary(
    positions: torch.Tensor, head_dim: int, theta: float, sections: list[int], interleaved: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """M-RoPE cos, sin [T, D] from positions [3, T] (temporal, height, width).

    Each frequency of the first half takes its angle from one of the three position rows: the
    interleaved layout cycles t, h, w over frequencies (up to each section's share); the plain one
    gives each row a contiguous block. Text tokens use one position in all three rows, which makes
    this equal to ordinary RoPE; it is written out so that the checkpoint's sections are honoured.
    """
    inv = inverse_frequencies(head_dim, theta, positions.device)
    angles = positions[:, :, None].float() * inv  # [3, T, D/2]
    if interleaved:
        chosen = angles[0].clone()
        for row, size in enumerate(sections[1:], start=1):
            chosen[..., row : size * len(sections) : len(sections)] = angles[row, ..., row : size * len(sections) : len(sections)]
    else:
        parts, start = [], 0
        for row, size in enumerate(sections):
            parts.append(angles[row % 3, ..., start : start + size])
            start += size
        chosen = torch.cat(parts, dim=-1)
    chosen = torch.cat([chosen, chosen], dim=-1)
    return chosen.cos(), chosen.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., D] rotated: x*cos + rotate_half(x)*sin (cos/sin broadcast over heads)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def causal_mask(length: int, window: int | None = None, device: torch.device | str = "cpu", offset: int = 0) -> torch.Tensor:
    """[length, offset + length] bool: query i (at offset + i) sees keys j <= offset + i (within `window` of it)."""
    query = torch.arange(length, device=device)[:, None] + offset
    key = torch.arange(offset + length, device=device)[None, :]
    mask = key <= query
    if window is not None:
        mask &= key > query - window
    return mask


class DenseAttention(nn.Module):
    """Multi-head attention over whole [B, T, H] sequences, causal (optionally windowed), GQA, optional q/k norms.

    Used where every row of a batch has the same length: the code predictor (with a growing cache of
    its 2 + G - 2 positions) and the codec transformers (one window at a time)."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, bias: bool = False,
                 qk_norm_eps: float | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias)
        if qk_norm_eps is not None:
            self.q_norm = RMSNorm(head_dim, qk_norm_eps)
            self.k_norm = RMSNorm(head_dim, qk_norm_eps)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                cache: list[torch.Tensor] | None = None) -> torch.Tensor:
        """x [B, T, H]; cos/sin [T, D]; mask [T, S] (S = cached + T); cache: [k, v] to extend in place."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = rotate(q, cos[:, None], sin[:, None]).transpose(1, 2)
        k = rotate(k, cos[:, None], sin[:, None]).transpose(1, 2)
        v = v.transpose(1, 2)
        if cache is not None:
            if cache:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
                cache[0], cache[1] = k, v
            else:
                cache.extend([k, v])
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.heads != self.kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))
