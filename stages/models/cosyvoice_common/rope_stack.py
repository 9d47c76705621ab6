"""A stack of pre-norm decoder layers with a final norm and plain 1-D RoPE, run two ways: one runtime step over the
paged KV cache, or whole rows without a cache (tests, goldens); `DecoderStack` builds it. Shared by the Llama/Qwen2
speech LMs."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from vocalis.stages.layers.attention import causal_mask
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.layers.transformer import gated_decoder_layer
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = rope(positions, head_dim, theta)
    return cos.to(dtype), sin.to(dtype)


def run_cached(layers: Iterable[nn.Module], norm: nn.Module, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache,
               head_dim: int, theta: float) -> torch.Tensor:
    """Hidden states [T, H] of a step's flattened tokens over the runtime's KV cache."""
    rotary = rope_tables(batch.token_positions.to(embeds.device), head_dim, theta, embeds.dtype)
    x = embeds
    for index, layer in enumerate(layers):
        x = layer.cached(x, rotary, cache, index, batch)
    return norm(x)


def run_dense(layers: Iterable[nn.Module], norm: nn.Module, embeds: torch.Tensor, head_dim: int, theta: float) -> torch.Tensor:
    """Hidden states [B, L, H] of whole rows (causal), without the runtime's cache."""
    length = embeds.shape[1]
    rotary = rope_tables(torch.arange(length, device=embeds.device), head_dim, theta, embeds.dtype)
    mask = causal_mask(length, device=embeds.device)
    x = embeds
    for layer in layers:
        x = layer.dense(x, rotary, mask)
    return norm(x)


class DecoderStack(nn.Module):
    """`embed_tokens`, `layers`, `norm` of a transformers Qwen2 or Llama model (the speech LMs' backbone, named as
    their checkpoints' tensors), run by `run_cached` / `run_dense`."""

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int, heads: int, kv_heads: int, head_dim: int,
                 intermediate_size: int, eps: float, *, bias: bool, o_bias: bool | None = None) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList(
            gated_decoder_layer(hidden_size, heads, kv_heads, head_dim, intermediate_size, eps, bias=bias, o_bias=o_bias)
            for _ in range(num_layers)
        )
        self.norm = RMSNorm(hidden_size, eps)
