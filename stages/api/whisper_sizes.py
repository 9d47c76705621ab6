"""The sizes a Whisper-style audio encoder's config publishes under transformers' Whisper names, declared once for the
family configs that hold such an encoder (AuK's thinker audio tower, GLM-TTS's WhisperVQ speech tokenizer); the
encoder layer itself is `stages/components/whisper.py`'s. The values come from the checkpoint's own file."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WhisperEncoderSizes:
    num_mel_bins: int
    d_model: int
    encoder_layers: int
    encoder_attention_heads: int
    encoder_ffn_dim: int
    max_source_positions: int
