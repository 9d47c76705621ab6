"""The pre-norm decoder layer: x + attn(norm(x)), then x + mlp(norm(x)), with optional branch scales."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import nn

from vocalis.stages.layers.attention import QKVAttention
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.norm import RMSNorm


class LayerScale(nn.Module):
    """A learned per-channel scale of a residual branch (`*_layer_scale.scale` in Mimi-style checkpoints)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class PreNormDecoderLayer(nn.Module):
    """`input_layernorm`, `self_attn`, `post_attention_layernorm`, `mlp` (+ `self_attn_layer_scale`, `mlp_layer_scale`).

    `norm` builds each of the two norms (an RMSNorm, or a LayerNorm for Mimi). `residual_scale` multiplies both
    branches by a constant (MiniCPM's muP scale_depth / sqrt(num_layers)); `layer_scale` adds learned per-channel
    branch scales (Mimi). `cached` and `dense` pass their arguments on to the attention's backend of that name.
    """

    def __init__(self, hidden: int, self_attn: QKVAttention, mlp: nn.Module, norm: Callable[[int], nn.Module],
                 residual_scale: float = 1.0, layer_scale: bool = False) -> None:
        super().__init__()
        self.input_layernorm = norm(hidden)
        self.self_attn = self_attn
        self.post_attention_layernorm = norm(hidden)
        self.mlp = mlp
        self.residual_scale = residual_scale
        if layer_scale:
            self.self_attn_layer_scale = LayerScale(hidden)
            self.mlp_layer_scale = LayerScale(hidden)
        else:
            self.self_attn_layer_scale = self.mlp_layer_scale = None

    def _add(self, residual: torch.Tensor, branch: torch.Tensor, layer_scale: LayerScale | None) -> torch.Tensor:
        if layer_scale is not None:
            branch = layer_scale(branch)
        return residual + branch * self.residual_scale if self.residual_scale != 1.0 else residual + branch

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self._add(x, self.mlp(self.post_attention_layernorm(x)), self.mlp_layer_scale)

    def cached(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        x = self._add(x, self.self_attn.cached(self.input_layernorm(x), *args, **kwargs), self.self_attn_layer_scale)
        return self._mlp(x)

    def dense(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        x = self._add(x, self.self_attn.dense(self.input_layernorm(x), *args, **kwargs), self.self_attn_layer_scale)
        return self._mlp(x)


def gated_decoder_layer(hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int, eps: float, *,
                        bias: bool = False, qk_norm: bool = False, rope_upcast: bool = False, norm_upcast: bool = True,
                        residual_scale: float = 1.0, layer_scale: bool = False, o_bias: bool | None = None) -> PreNormDecoderLayer:
    """The Llama-family layer (RMSNorms, QKVAttention, SiLU GatedMLP) with each family's variant as a keyword:
    Qwen3 sets `qk_norm`, Qwen2 `bias` (q/k/v only: `o_bias=False`), MiniCPM `rope_upcast` and `residual_scale`, Mimi-style decoders `layer_scale`."""
    attention = QKVAttention(hidden, heads, kv_heads, head_dim, bias=bias, qk_norm_eps=eps if qk_norm else None,
                             rope_upcast=rope_upcast, o_bias=o_bias)
    return PreNormDecoderLayer(hidden, attention, GatedMLP(hidden, intermediate), lambda dim: RMSNorm(dim, eps, upcast=norm_upcast),
                               residual_scale=residual_scale, layer_scale=layer_scale)


class LlamaDecoderSizes(Protocol):
    """The fields of a transformers Llama/Qwen decoder config that its layers are built from (a family's config
    dataclass: `api.decoder_sizes.TransformerSizes` plus the norms' eps and the projections' bias), in the order
    `gated_decoder_layer` takes them."""

    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    attention_bias: bool
    num_hidden_layers: int


def gated_decoder_layers(config: LlamaDecoderSizes, *, qk_norm: bool = False, layer_scale: bool = False) -> nn.ModuleList:
    """The `num_hidden_layers` layers of a decoder config (`layers.{i}.*` where the owner names it `layers`), each a
    `gated_decoder_layer` with the config's sizes and bias; `qk_norm` for Qwen3, `layer_scale` for Mimi-style ones."""
    c = config
    sizes = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size, c.rms_norm_eps)
    return nn.ModuleList(
        gated_decoder_layer(*sizes, bias=c.attention_bias, qk_norm=qk_norm, layer_scale=layer_scale)
        for _ in range(c.num_hidden_layers)
    )
