"""The Qwen3.5 hybrid decoder: Gated DeltaNet linear-attention layers mixed with gated full-attention layers.

`layer_types` (from the checkpoint's config) says which layer is which: published Qwen3.5 models put one
"full_attention" layer after every three "linear_attention" ones. Full-attention layers keep keys and values in
the runtime's paged KV cache (numbered among themselves: the cache has only those layers), linear ones a recurrent
state per sequence in its RecurrentStates (also numbered among themselves). Full attention has an output gate,
zero-centred q/k-norms and partial RoPE (the first `head_dim * partial_rotary_factor` channels); text positions
are the same in every M-RoPE row, so plain RoPE over those channels is exact for text. Norms are zero-centred
RMSNorms (`1 + weight`). `qwen3_5_moe_text` configs (`num_experts` set) put a top-k routed MoE with a gated
shared expert (stages/layers/moe.py) in place of every dense MLP. Attribute names are the published ones (`embed_tokens`, `layers.N.linear_attn.*`,
`layers.N.self_attn.*`, `layers.N.mlp.*`, `norm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from vocalis.stages.layers.attention import QKVAttention, causal_mask
from vocalis.stages.layers.gated_deltanet import GatedDeltaNet
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.moe import Experts, ExpertsFactory, SparseMoE
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.block_manager import CacheShape, StateShape

LINEAR = "linear_attention"
FULL = "full_attention"


@dataclass(frozen=True)
class HybridConfig:
    """The fields of a `qwen3_5_text` config the decoder uses (names as published)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    layer_types: tuple[str, ...]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    rms_norm_eps: float
    rope_theta: float
    partial_rotary_factor: float
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    num_experts: int = 0
    """`qwen3_5_moe_text`: experts per MoE layer (0: dense MLPs)."""
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> HybridConfig:
        """From a `qwen3_5_text` config (or the `text_config` of a composite one). Missing `layer_types` follow
        `full_attention_interval` as transformers does (every interval-th layer full)."""
        layers = int(config["num_hidden_layers"])
        types = config.get("layer_types")
        if types is None:
            interval = int(config.get("full_attention_interval", 4))
            types = [FULL if (i + 1) % interval == 0 else LINEAR for i in range(layers)]
        if len(types) != layers or set(types) - {LINEAR, FULL}:
            raise ValueError(f"layer_types must list {layers} of {LINEAR!r} / {FULL!r}; got {types}")
        rope_parameters = config.get("rope_parameters") or config.get("rope_scaling") or {}
        theta = rope_parameters.get("rope_theta", config.get("rope_theta", 10_000_000.0))
        partial = rope_parameters.get("partial_rotary_factor", config.get("partial_rotary_factor", 0.25))
        heads = int(config["num_attention_heads"])
        return cls(
            vocab_size=int(config["vocab_size"]),
            hidden_size=int(config["hidden_size"]),
            intermediate_size=int(config.get("intermediate_size", 0)),  # absent in MoE configs
            num_hidden_layers=layers,
            layer_types=tuple(types),
            num_attention_heads=heads,
            num_key_value_heads=int(config["num_key_value_heads"]),
            head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
            linear_num_key_heads=int(config["linear_num_key_heads"]),
            linear_num_value_heads=int(config["linear_num_value_heads"]),
            linear_key_head_dim=int(config["linear_key_head_dim"]),
            linear_value_head_dim=int(config["linear_value_head_dim"]),
            linear_conv_kernel_dim=int(config["linear_conv_kernel_dim"]),
            rms_norm_eps=float(config["rms_norm_eps"]),
            rope_theta=float(theta),
            partial_rotary_factor=float(partial),
            max_position_embeddings=int(config.get("max_position_embeddings", 32768)),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            num_experts=int(config.get("num_experts", 0)),
            num_experts_per_tok=int(config.get("num_experts_per_tok", 0)),
            moe_intermediate_size=int(config.get("moe_intermediate_size", 0)),
            shared_expert_intermediate_size=int(config.get("shared_expert_intermediate_size", 0)),
        )

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def num_full_layers(self) -> int:
        return self.layer_types.count(FULL)

    @property
    def num_linear_layers(self) -> int:
        return self.layer_types.count(LINEAR)


def zero_centred_norm(dim: int, eps: float) -> RMSNorm:
    return RMSNorm(dim, eps, weight_offset=1.0)


class HybridDecoderLayer(nn.Module):
    """`input_layernorm`, `linear_attn` or `self_attn`, `post_attention_layernorm`, `mlp` (any module of [.., H])."""

    def __init__(self, config: HybridConfig, layer_type: str, mlp: nn.Module) -> None:
        super().__init__()
        c = config
        self.layer_type = layer_type
        self.input_layernorm = zero_centred_norm(c.hidden_size, c.rms_norm_eps)
        if layer_type == LINEAR:
            self.linear_attn = GatedDeltaNet(c.hidden_size, c.linear_num_key_heads, c.linear_num_value_heads,
                                             c.linear_key_head_dim, c.linear_value_head_dim, c.linear_conv_kernel_dim, c.rms_norm_eps)
        else:
            self.self_attn = QKVAttention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                                          qk_norm_eps=c.rms_norm_eps, output_gate=True, norm_weight_offset=1.0)
        self.post_attention_layernorm = zero_centred_norm(c.hidden_size, c.rms_norm_eps)
        self.mlp = mlp

    def cached(self, x: torch.Tensor, rope_cs, cache, index: int, batch: AttentionBatch) -> torch.Tensor:
        """`index`: this layer's number among the layers of its type (its KV-cache or state layer)."""
        normed = self.input_layernorm(x)
        if self.layer_type == LINEAR:
            mixed = self.linear_attn.cached(normed, cache.states, index, batch.recurrent)
        else:
            mixed = self.self_attn.cached(normed, rope_cs, cache, index, batch)
        x = x + mixed
        return x + self.mlp(self.post_attention_layernorm(x))

    def dense(self, x: torch.Tensor, rope_cs, mask: torch.Tensor) -> torch.Tensor:
        normed = self.input_layernorm(x)
        mixed = self.linear_attn.dense(normed) if self.layer_type == LINEAR else self.self_attn.dense(normed, rope_cs, mask)
        x = x + mixed
        return x + self.mlp(self.post_attention_layernorm(x))


class HybridDecoder(nn.Module):
    """`embed_tokens`, `layers`, `norm`. Each layer's MLP is the dense SiLU GatedMLP of `qwen3_5`, or with
    `num_experts` set the sparse MoE block of `qwen3_5_moe` (stages/layers/moe.py)."""

    def __init__(self, config: HybridConfig, experts: ExpertsFactory = Experts) -> None:
        """`experts`: how the MoE layers hold their routed experts (a checkpoint's quantised store, say)."""
        super().__init__()
        self.config = config

        def make_mlp() -> nn.Module:
            if config.num_experts:
                return SparseMoE(config.hidden_size, config.num_experts, config.num_experts_per_tok, config.moe_intermediate_size,
                                 config.shared_expert_intermediate_size, experts)
            return GatedMLP(config.hidden_size, config.intermediate_size)

        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(HybridDecoderLayer(config, kind, make_mlp()) for kind in config.layer_types)
        self.norm = zero_centred_norm(config.hidden_size, config.rms_norm_eps)
        indices, counts = [], {LINEAR: 0, FULL: 0}
        for kind in config.layer_types:
            indices.append(counts[kind])
            counts[kind] += 1
        self._indices = indices

    def cache_shape(self, max_len: int) -> CacheShape:
        """The KV cache of the full-attention layers."""
        c = self.config
        return CacheShape(c.num_full_layers, c.num_key_value_heads, c.head_dim, min(max_len, c.max_position_embeddings))

    def state_shape(self) -> StateShape | None:
        """The per-sequence recurrent state of the linear-attention layers; None where every layer is full attention
        (Gepard-1.0's published backbone: then the runtime keeps no state slots)."""
        first = next((layer for layer in self.layers if layer.layer_type == LINEAR), None)
        return None if first is None else first.linear_attn.state_shape(self.config.num_linear_layers)

    def _rope(self, positions: torch.Tensor):
        return rope(positions, self.config.rotary_dim, self.config.rope_theta)

    def cached(self, embeds: torch.Tensor, batch: AttentionBatch, cache) -> torch.Tensor:
        """Final-normed hidden states [T, H] of a step's flattened input embeddings, through the runtime's caches."""
        rope_cs = self._rope(batch.token_positions)
        x = embeds
        for layer, index in zip(self.layers, self._indices, strict=True):
            x = layer.cached(x, rope_cs, cache, index, batch)
        return self.norm(x)

    def dense(self, embeds: torch.Tensor) -> torch.Tensor:
        """Final-normed hidden states [B, L, H] of whole rows of input embeddings, causal, from empty caches."""
        length = embeds.shape[1]
        rope_cs = self._rope(torch.arange(length, device=embeds.device))
        mask = causal_mask(length, device=embeds.device)
        x = embeds
        for layer in self.layers:
            x = layer.dense(x, rope_cs, mask)
        return self.norm(x)
