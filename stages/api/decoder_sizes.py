"""The sizes a decoder-only transformer's config.json publishes under transformers' Llama/Qwen names, declared once
for the family configs that read them without a default of their own (OmniVoice's backbone, higgs-audio v2)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecoderSizes:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
