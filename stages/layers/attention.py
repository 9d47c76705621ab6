"""Multi-head attention with q/k/v/o projections, GQA, optional projection bias and q/k-norm.

Two backends, chosen per call:
- `cached`: the flattened tokens [T, hidden] of an autoregressive step, attended over each sequence's prefix in the
  runtime's KV cache through `vocalis.stages.runtime.attention.cached_attention` (the cache's layout stays the runtime's);
- `dense`: whole rows [B, L, hidden] with an optional mask (causal, windowed, padding or none for bidirectional
  stacks), optionally extending a per-call list cache [k, v] (a small decoder run step by step, no runtime cache).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import apply_rotary
from vocalis.stages.runtime.attention import AttentionBatch, cached_attention

if TYPE_CHECKING:
    from vocalis.stages.layers.quantized_linear import QuantizedLinear

Rope = tuple[torch.Tensor, torch.Tensor]
"""(cos, sin), each [T, head_dim]: one row per query position (or [B, T, head_dim]: per batch row, for `dense`)."""


def causal_mask(length: int, window: int | None = None, device: torch.device | str = "cpu", offset: int = 0) -> torch.Tensor:
    """[length, offset + length] bool: query i (at offset + i) sees keys j <= offset + i (within `window` of it)."""
    query = torch.arange(length, device=device)[:, None] + offset
    key = torch.arange(offset + length, device=device)[None, :]
    mask = key <= query
    if window is not None:
        mask &= key > query - window
    return mask


def step_mask(length: int, offset: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
    """`causal_mask(length, offset=offset)` for a step of `length` new queries after `offset` keys, or None for one
    query: it sees every key, and attention without a mask computes the same (bit for bit: an allowed key adds 0)."""
    return causal_mask(length, device=device, offset=offset) if length > 1 else None


def extend_kv(kv: list[torch.Tensor], k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A list cache [k, v] ([B, Hkv, S, D] each) grown in place by the new k, v [B, Hkv, L, D] (an empty list
    starts one); returns the keys and values of every position so far."""
    if kv:
        k, v = torch.cat([kv[0], k], dim=2), torch.cat([kv[1], v], dim=2)
        kv[0], kv[1] = k, v
    else:
        kv.extend([k, v])
    return k, v


class QKVAttention(nn.Module):
    """`q_proj`, `k_proj`, `v_proj`, `o_proj` (+ `q_norm`, `k_norm` over each head when `qk_norm_eps` is set).

    `bias`: on all four projections, or on q/k/v only with `o_bias=False` (Qwen2); `rope_upcast`: rotate in float32
    (see `apply_rotary`). `output_gate` (Qwen3.5): `q_proj` also yields a per-channel gate (each head's query then its
    gate), and the attention output is multiplied by sigmoid(gate) before `o_proj`. `norm_weight_offset`: the q/k-norms
    store their weight as an offset (Qwen3.5's zero-centred `1 + weight`). `qkv_proj`: set (in place of the three) by
    a quantising deploy option, which joins them into one product (`fused_inputs`, stages/layers/quantized_linear.py).
    """

    fused_inputs: ClassVar[dict[str, tuple[str, ...]]] = {"qkv_proj": ("q_proj", "k_proj", "v_proj")}

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, bias: bool = False,
                 qk_norm_eps: float | None = None, rope_upcast: bool = False, output_gate: bool = False,
                 norm_weight_offset: float = 0.0, o_bias: bool | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.rope_upcast = rope_upcast
        self.output_gate = output_gate
        self.q_proj = nn.Linear(hidden, heads * head_dim * (2 if output_gate else 1), bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias if o_bias is None else o_bias)
        self.qkv_proj: QuantizedLinear | None = None
        if qk_norm_eps is not None:
            self.q_norm = RMSNorm(head_dim, qk_norm_eps, weight_offset=norm_weight_offset)
            self.k_norm = RMSNorm(head_dim, qk_norm_eps, weight_offset=norm_weight_offset)
        else:
            self.q_norm = self.k_norm = None

    def _qkv(self, x: torch.Tensor, rope: Rope | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """q [..., T, Hq, D], k/v [..., T, Hkv, D] of x [..., T, hidden]: projected, q/k-normed, rotated; and the
        output gate [..., T, Hq * D] (None without `output_gate`)."""
        lead = x.shape[:-1]
        if self.qkv_proj is not None:
            qkv = self.qkv_proj(x)
            if self.q_norm is not None and not self.output_gate:
                return self._joined_qk(qkv.view(*lead, self.heads + 2 * self.kv_heads, self.head_dim), rope)
            q, k, v = qkv.split(self.qkv_proj.parts, dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        gate = None
        if self.output_gate:
            q, gate = q.view(*lead, self.heads, 2 * self.head_dim).chunk(2, dim=-1)
            gate = gate.reshape(*lead, self.heads * self.head_dim)
        q = q.reshape(*lead, self.heads, self.head_dim)
        k = k.view(*lead, self.kv_heads, self.head_dim)
        v = v.view(*lead, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            cos, sin = rope[0].unsqueeze(-2), rope[1].unsqueeze(-2)  # broadcast over heads
            q = apply_rotary(q, cos, sin, self.rope_upcast)
            k = apply_rotary(k, cos, sin, self.rope_upcast)
        return q, k, v, gate

    def _joined_qk(self, heads: torch.Tensor, rope: Rope | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        """`_qkv` from the joined projection's output as heads [..., T, Hq + 2 Hkv, D]: the query and key heads
        normed as one tensor (`RMSNorm.normalize`, then each head by its own norm's weight) and rotated as one, so a
        step runs one norm and one rotation where it would run two of each; the same values bit for bit (tested).
        q and k come back as views of that one tensor."""
        qk_heads = self.heads + self.kv_heads
        qk = self.q_norm.normalize(heads[..., :qk_heads, :])  # a new tensor; both norms are built alike: one eps
        qk[..., : self.heads, :].mul_(self.q_norm.scale)
        qk[..., self.heads :, :].mul_(self.k_norm.scale)
        if rope is not None:
            qk = apply_rotary(qk, rope[0].unsqueeze(-2), rope[1].unsqueeze(-2), self.rope_upcast)
        return qk[..., : self.heads, :], qk[..., self.heads :, :], heads[..., qk_heads:, :], None

    def _out(self, out: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """o_proj of the attended values out [..., T, Hq * D] (gated first with `output_gate`)."""
        return self.o_proj(out if gate is None else out * torch.sigmoid(gate))

    def project(self, x: torch.Tensor, rope: Rope | None):
        """q, k, v and the output gate of x, for a caller that keeps its own keys and values (see `_qkv`)."""
        return self._qkv(x, rope)

    def output(self, out: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """o_proj of attended values [..., Hq * D] (gated with `output_gate`), the counterpart of `project`."""
        return self._out(out, gate)

    def cached(self, x: torch.Tensor, rope: Rope | None, cache, layer: int, batch: AttentionBatch) -> torch.Tensor:
        """Causal attention of a step's flattened tokens x [T, hidden] over their sequences' cached prefixes."""
        q, k, v, gate = self._qkv(x, rope)
        out = cached_attention(q, k, v, cache, layer, batch)
        return self._out(out.reshape(x.shape[0], -1), gate)

    def dense(self, x: torch.Tensor, rope: Rope | None, mask: torch.Tensor | None = None,
              kv: list[torch.Tensor] | None = None, static_kv: tuple[torch.Tensor, torch.Tensor, int] | None = None) -> torch.Tensor:
        """Attention within each row of x [B, L, hidden]; mask broadcasts to [B, H, L, S] (None: every key).

        `kv`: [k, v] of earlier positions, extended in place (an empty list starts one). `static_kv`: (k, v, start)
        instead, preallocated [B, Hkv, S, D] buffers: the new keys/values are written at start.. and the attention
        reads positions 0..start+L-1 (fixed addresses and shapes, as a CUDA graph needs)."""
        b, length, _ = x.shape
        q, k, v, gate = self._qkv(x, rope)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if static_kv is not None:
            k_buffer, v_buffer, start = static_kv
            k_buffer[:, :, start : start + length] = k
            v_buffer[:, :, start : start + length] = v
            k, v = k_buffer[:, :, : start + length], v_buffer[:, :, : start + length]
        elif kv is not None:
            k, v = extend_kv(kv, k, v)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.heads != self.kv_heads)
        return self._out(out.transpose(1, 2).reshape(b, length, -1), gate)
