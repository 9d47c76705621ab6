"""The template family's torch modules: a Qwen-style talker and a causal conv codec decoder."""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.audio_blocks import CausalConv1d, summed_lookup
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.layers.transformer import PreNormDecoderLayer, gated_decoder_layer
from vocalis.stages.models._template.config import CodecConfig, TalkerConfig
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache

SPEAKER_DIM = 16
"""Length of the tiny family's speaker embedding (loudness contour of the reference clip)."""


def decoder_layer(c: TalkerConfig) -> PreNormDecoderLayer:
    """A Llama-style layer without q/k-norm, its RMSNorms in the input's dtype."""
    return gated_decoder_layer(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size, 1e-6,
                               norm_upcast=False)


class TinyTalker(nn.Module):
    def __init__(self, config: TalkerConfig) -> None:
        super().__init__()
        self.config = config
        self.text_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(config.codebook_size, config.hidden_size) for _ in range(config.num_codebooks)
        )
        self.layers = nn.ModuleList(decoder_layer(config) for _ in range(config.num_hidden_layers))
        self.speaker_proj = nn.Linear(SPEAKER_DIM, config.hidden_size, bias=False)
        self.norm = RMSNorm(config.hidden_size, upcast=False)
        self.codec_head = nn.Linear(config.hidden_size, config.num_codebooks * config.codebook_size, bias=False)

    def embed_frames(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, K] codes to [B, H]: the sum of the codebook embeddings."""
        return summed_lookup(frames, [embedding.weight for embedding in self.codec_embedding])

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        x = embeds
        rotary = rope(batch.token_positions, self.config.head_dim, self.config.rope_theta)
        for index, layer in enumerate(self.layers):
            x = layer.cached(x, rotary, cache, index, batch)
        return self.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, H] to [B, K, V]."""
        return self.codec_head(hidden).view(hidden.shape[0], self.config.num_codebooks, self.config.codebook_size)


class ResidualCausalConv(nn.Module):
    """x + tanh(causal conv(x))."""

    def __init__(self, channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = CausalConv1d(channels, channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.conv(x))


class TinyCodecDecoder(nn.Module):
    def __init__(self, config: CodecConfig) -> None:
        super().__init__()
        self.config = config
        self.codebooks = nn.ModuleList(nn.Embedding(config.codebook_size, config.embed_dim) for _ in range(config.num_codebooks))
        self.input_proj = nn.Conv1d(config.embed_dim, config.channels, 1)
        self.layers = nn.ModuleList(ResidualCausalConv(config.channels, config.kernel_size) for _ in range(config.num_layers))
        self.output_proj = nn.Linear(config.channels, config.samples_per_frame)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, T, K] codes to [B, T * samples_per_frame] samples in [-1, 1]."""
        x = summed_lookup(frames, [embedding.weight for embedding in self.codebooks])  # [B, T, E]
        x = self.input_proj(x.transpose(1, 2))
        for layer in self.layers:
            x = layer(x)
        samples = torch.tanh(self.output_proj(x.transpose(1, 2)))  # [B, T, hop]
        return samples.reshape(frames.shape[0], -1)
