"""MiniCPM4 decoder stacks: the base and residual LMs (causal, over the runtime's KV cache) and the
LocEnc / LocDiT encoders (bidirectional, over a handful of positions, no cache).

Built from the shared layers with MiniCPM's variants: LongRoPE rotated in float32, no projection bias, no q/k-norm,
and muP residual branches scaled by scale_depth / sqrt(num_layers).
Parameter names follow the checkpoint: `layers.{i}.self_attn.{q,k,v,o}_proj`, `layers.{i}.mlp.{gate,up,down}_proj`,
`layers.{i}.{input,post_attention}_layernorm`, `norm`, and `embed_tokens` for the base LM.
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import LongRoPE
from vocalis.stages.layers.transformer import PreNormDecoderLayer, gated_decoder_layer
from vocalis.stages.models.voxcpm2.config import TransformerConfig
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache


def long_rope(config: TransformerConfig) -> LongRoPE:
    scaling = config.rope_scaling
    if scaling is None:
        raise ValueError("a stack with RoPE needs rope_scaling")
    return LongRoPE(config.head_dim, config.rope_theta, scaling.short_factor, scaling.long_factor,
                    config.max_position_embeddings, scaling.original_max_position_embeddings)


def decoder_layer(c: TransformerConfig) -> PreNormDecoderLayer:
    return gated_decoder_layer(c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.rms_norm_eps,
                               rope_upcast=True, residual_scale=c.residual_scale)


class MiniCPMStack(nn.Module):
    """Decoder layers + final norm (+ token embedding for the base LM)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        if config.vocab_size > 0:
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(decoder_layer(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rope = None if config.no_rope else long_rope(config)

    def cached(self, x: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache, first_layer: int = 0) -> torch.Tensor:
        """Causal pass over flattened step tokens x [T, H]; this stack's layers are cache layers first_layer... ."""
        rope = None if self.rope is None else self.rope(batch.token_positions.to(x.device))
        for i, layer in enumerate(self.layers):
            x = layer.cached(x, rope, cache, first_layer + i, batch)
        return self.norm(x)

    def dense(self, x: torch.Tensor) -> torch.Tensor:
        """Bidirectional pass over x [N, L, H] (positions 0..L-1 in every row)."""
        rope = None if self.rope is None else self.rope(torch.arange(x.shape[1], device=x.device))
        for layer in self.layers:
            x = layer.dense(x, rope)
        return self.norm(x)
