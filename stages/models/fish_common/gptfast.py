"""The pre-norm decoder layer in gpt-fast's spelling: one fused `wqkv` projection and `wo`, a `feed_forward` of
`w1`/`w3`/`w2`, `attention_norm`/`ffn_norm`, rotary embeddings on interleaved channel pairs.

Fish Audio's checkpoints use it three times: the slow AR and the fast AR of S2 Pro, and the window-limited
transformers inside its DAC codec (which add learned branch scales, `*_layer_scale.gamma`). The arithmetic is the
same as `transformer.PreNormDecoderLayer`; only the tensor names and the rotary pairing differ, so it is a block of
its own rather than a renaming layer over that one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.attention import extend_kv
from vocalis.stages.layers.mlp import SwiGLU
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import apply_interleaved_rotary
from vocalis.stages.runtime.attention import AttentionBatch, cached_attention

Rope = tuple[torch.Tensor, torch.Tensor]
"""(cos, sin), each [T, head_dim / 2], from `rotary.interleaved_rope`."""


class FusedQKVAttention(nn.Module):
    """`wqkv` ([q; k; v] rows), `wo`, optional per-head `q_norm`/`k_norm`; GQA when kv_heads < heads."""

    def __init__(self, dim: int, heads: int, kv_heads: int, head_dim: int, qk_norm_eps: float | None = None,
                 qkv_bias: bool = False, o_bias: bool = False) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.wqkv = nn.Linear(dim, (heads + 2 * kv_heads) * head_dim, bias=qkv_bias)
        self.wo = nn.Linear(heads * head_dim, dim, bias=o_bias)
        if qk_norm_eps is not None:
            self.q_norm = RMSNorm(head_dim, qk_norm_eps)
            self.k_norm = RMSNorm(head_dim, qk_norm_eps)
        else:
            self.q_norm = self.k_norm = None

    def _qkv(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [..., T, Hq, D], k/v [..., T, Hkv, D] of x [..., T, dim]."""
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        q, k, v = self.wqkv(x).split([q_size, kv_size, kv_size], dim=-1)
        lead = x.shape[:-1]
        q = q.reshape(*lead, self.heads, self.head_dim)
        k = k.reshape(*lead, self.kv_heads, self.head_dim)
        v = v.reshape(*lead, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_interleaved_rotary(q, *rope), apply_interleaved_rotary(k, *rope), v

    def dense(self, x: torch.Tensor, rope: Rope, mask: torch.Tensor | None = None,
              kv: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Attention within each row of x [B, L, dim]; `mask` bool, broadcast to [B, H, L, S], True = attend.

        `kv`: [k, v] of earlier positions of the rows, extended in place (an empty list starts one)."""
        b, length, _ = x.shape
        q, k, v = (t.transpose(1, 2) for t in self._qkv(x, rope))
        if kv is not None:
            k, v = extend_kv(kv, k, v)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.heads != self.kv_heads)
        return self.wo(out.transpose(1, 2).reshape(b, length, -1))

    def cached(self, x: torch.Tensor, rope: Rope, cache, layer: int, batch: AttentionBatch) -> torch.Tensor:
        """Causal attention of a step's flattened tokens x [T, dim] over their sequences' cached prefixes."""
        q, k, v = self._qkv(x[None], rope)
        out = cached_attention(q[0], k[0], v[0], cache, layer, batch)
        return self.wo(out.reshape(x.shape[0], -1))


class Gamma(nn.Module):
    """A learned per-channel scale of a residual branch, stored as `gamma`."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class GptFastBlock(nn.Module):
    """`attention_norm`, `attention`, `ffn_norm`, `feed_forward` (+ `attention_layer_scale`, `ffn_layer_scale`)."""

    def __init__(self, dim: int, attention: FusedQKVAttention, intermediate: int, eps: float,
                 layer_scale: bool = False) -> None:
        super().__init__()
        self.attention = attention
        self.feed_forward = SwiGLU(dim, intermediate)
        self.ffn_norm = RMSNorm(dim, eps)
        self.attention_norm = RMSNorm(dim, eps)
        if layer_scale:
            self.attention_layer_scale = Gamma(dim)
            self.ffn_layer_scale = Gamma(dim)
        else:
            self.attention_layer_scale = self.ffn_layer_scale = None

    def _ffn(self, h: torch.Tensor) -> torch.Tensor:
        branch = self.feed_forward(self.ffn_norm(h))
        return h + (self.ffn_layer_scale(branch) if self.ffn_layer_scale is not None else branch)

    def _add(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return x + (self.attention_layer_scale(branch) if self.attention_layer_scale is not None else branch)

    def dense(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return self._ffn(self._add(x, self.attention.dense(self.attention_norm(x), *args, **kwargs)))

    def cached(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return self._ffn(self._add(x, self.attention.cached(self.attention_norm(x), *args, **kwargs)))


def gptfast_block(dim: int, heads: int, kv_heads: int, head_dim: int, intermediate: int, eps: float, *,
                  qk_norm: bool = False, layer_scale: bool = False) -> GptFastBlock:
    attention = FusedQKVAttention(dim, heads, kv_heads, head_dim, qk_norm_eps=eps if qk_norm else None)
    return GptFastBlock(dim, attention, intermediate, eps, layer_scale=layer_scale)
