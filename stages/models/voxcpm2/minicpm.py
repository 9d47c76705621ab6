"""MiniCPM4 decoder stacks: the base and residual LMs (causal, over the slot KV cache) and the
LocEnc / LocDiT encoders (bidirectional, over a handful of positions, no cache).

Parameter names follow the checkpoint: `layers.{i}.self_attn.{q,k,v,o}_proj`, `layers.{i}.mlp.{gate,up,down}_proj`,
`layers.{i}.{input,post_attention}_layernorm`, `norm`, and `embed_tokens` for the base LM.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.attention import AttentionBatch, cached_attention
from vocalis.stages.kv_cache import SlotKVCache
from vocalis.stages.models.voxcpm2.config import TransformerConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x * torch.rsqrt(variance + self.eps)).to(x.dtype) * self.weight


class LongRoPE:
    """Rotary embedding with MiniCPM's LongRoPE factors, evaluated at any positions.

    The factor set is fixed by the config, not by the sequence: the long factors (and the attention
    scaling that goes with them) apply once `max_position_embeddings` exceeds the original range.
    """

    def __init__(self, config: TransformerConfig) -> None:
        scaling = config.rope_scaling
        if scaling is None:
            raise ValueError("a stack with RoPE needs rope_scaling")
        dim = config.head_dim
        self.inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2).float() / dim))
        original = scaling.original_max_position_embeddings
        long = config.max_position_embeddings > original
        factors = scaling.long_factor if long else scaling.short_factor
        if len(factors) != dim // 2:
            raise ValueError(f"rope_scaling factors have {len(factors)} values; head size {dim} needs {dim // 2}")
        self.ext_factors = torch.tensor(factors, dtype=torch.float32)
        self.scaling = math.sqrt(1 + math.log(config.max_position_embeddings / original) / math.log(original))

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, head_dim] (float32) at positions [T]."""
        t = positions.to(torch.float32).cpu()
        freqs = torch.outer(t, 1.0 / self.ext_factors) * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.scaling).to(positions.device), (emb.sin() * self.scaling).to(positions.device)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., T, D] rotated in float32 (cos/sin [T, D] broadcast over leading dims), back in x's dtype."""
    xf = x.float()
    return (xf * cos + _rotate_half(xf) * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        h, d = config.hidden_size, config.head_dim
        self.q_proj = nn.Linear(h, config.num_heads * d, bias=False)
        self.k_proj = nn.Linear(h, config.num_kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, config.num_kv_heads * d, bias=False)
        self.o_proj = nn.Linear(config.num_heads * d, h, bias=False)

    def cached(self, x: torch.Tensor, rope, batch: AttentionBatch, cache: SlotKVCache, layer: int) -> torch.Tensor:
        """Causal attention of flattened step tokens x [T, H] over their sequences' cached prefixes."""
        c = self.config
        q = self.q_proj(x).view(-1, c.num_heads, c.head_dim)
        k = self.k_proj(x).view(-1, c.num_kv_heads, c.head_dim)
        v = self.v_proj(x).view(-1, c.num_kv_heads, c.head_dim)
        if rope is not None:
            cos, sin = rope
            q, k = apply_rope(q, cos[:, None], sin[:, None]), apply_rope(k, cos[:, None], sin[:, None])
        out = cached_attention(q, k, v, cache, layer, batch)
        return self.o_proj(out.reshape(x.shape[0], -1))

    def dense(self, x: torch.Tensor, rope) -> torch.Tensor:
        """Bidirectional attention within each row of x [N, L, H]."""
        c = self.config
        n, length, _ = x.shape
        q = self.q_proj(x).view(n, length, c.num_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(n, length, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(n, length, c.num_kv_heads, c.head_dim).transpose(1, 2)
        if rope is not None:
            cos, sin = rope
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(n, length, -1))


class MLP(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.scale = config.residual_scale
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def _add(self, residual: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return residual + branch * self.scale if self.scale != 1.0 else residual + branch

    def cached(self, x: torch.Tensor, rope, batch: AttentionBatch, cache: SlotKVCache, layer: int) -> torch.Tensor:
        x = self._add(x, self.self_attn.cached(self.input_layernorm(x), rope, batch, cache, layer))
        return self._add(x, self.mlp(self.post_attention_layernorm(x)))

    def dense(self, x: torch.Tensor, rope) -> torch.Tensor:
        x = self._add(x, self.self_attn.dense(self.input_layernorm(x), rope))
        return self._add(x, self.mlp(self.post_attention_layernorm(x)))


class MiniCPMStack(nn.Module):
    """Decoder layers + final norm (+ token embedding for the base LM)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        if config.vocab_size > 0:
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rope = None if config.no_rope else LongRoPE(config)

    def cached(self, x: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache, first_layer: int = 0) -> torch.Tensor:
        """Causal pass over flattened step tokens x [T, H]; this stack's layers are cache layers first_layer... ."""
        rope = None if self.rope is None else self.rope(batch.token_positions.to(x.device))
        for i, layer in enumerate(self.layers):
            x = layer.cached(x, rope, batch, cache, first_layer + i)
        return self.norm(x)

    def dense(self, x: torch.Tensor) -> torch.Tensor:
        """Bidirectional pass over x [N, L, H] (positions 0..L-1 in every row)."""
        rope = None if self.rope is None else self.rope(torch.arange(x.shape[1], device=x.device))
        for layer in self.layers:
            x = layer.dense(x, rope)
        return self.norm(x)
