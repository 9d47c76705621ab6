"""The tiny test family's torch modules: a Qwen-style talker and a causal conv codec decoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.tiny_tts.config import CodecConfig, TalkerConfig
from vocalis.stages.attention import AttentionBatch, cached_attention
from vocalis.stages.kv_cache import SlotKVCache

SPEAKER_DIM = 16
"""Length of the tiny family's speaker embedding (loudness contour of the reference clip)."""


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [T, 1, D/2] of the rotary embedding at positions [T] (computed once per step)."""
    half = head_dim // 2
    freqs = 1.0 / theta ** (torch.arange(half, dtype=torch.float32, device=positions.device) / half)
    angles = positions[:, None].float() * freqs[None, :]
    return angles.cos()[:, None, :], angles.sin()[:, None, :]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x [T, H, D]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, config: TalkerConfig) -> None:
        super().__init__()
        self.config = config
        self.q_proj = nn.Linear(config.hidden_size, config.num_heads * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.num_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.num_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.num_heads * config.head_dim, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache, layer: int, rope) -> torch.Tensor:
        c = self.config
        q = rotate(self.q_proj(x).view(-1, c.num_heads, c.head_dim), *rope)
        k = rotate(self.k_proj(x).view(-1, c.num_kv_heads, c.head_dim), *rope)
        v = self.v_proj(x).view(-1, c.num_kv_heads, c.head_dim)
        out = cached_attention(q, k, v, cache, layer, batch)
        return self.o_proj(out.reshape(x.shape[0], -1))


class DecoderLayer(nn.Module):
    def __init__(self, config: TalkerConfig) -> None:
        super().__init__()
        self.input_norm = RMSNorm(config.hidden_size)
        self.attn = Attention(config)
        self.post_norm = RMSNorm(config.hidden_size)
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache, layer: int, rope) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x), batch, cache, layer, rope)
        h = self.post_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class TinyTalker(nn.Module):
    def __init__(self, config: TalkerConfig) -> None:
        super().__init__()
        self.config = config
        self.text_embedding = nn.Embedding(config.text_vocab_size, config.hidden_size)
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(config.codebook_size, config.hidden_size) for _ in range(config.num_codebooks)
        )
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.speaker_proj = nn.Linear(SPEAKER_DIM, config.hidden_size, bias=False)
        self.norm = RMSNorm(config.hidden_size)
        self.codec_head = nn.Linear(config.hidden_size, config.num_codebooks * config.codebook_size, bias=False)

    def embed_frames(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, K] codes to [B, H]: the sum of the codebook embeddings."""
        return sum(embedding(frames[:, i]) for i, embedding in enumerate(self.codec_embedding))  # type: ignore[return-value]

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        x = embeds
        rope = rotary(batch.token_positions, self.config.head_dim, self.config.rope_theta)
        for index, layer in enumerate(self.layers):
            x = layer(x, batch, cache, index, rope)
        return self.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, H] to [B, K, V]."""
        return self.codec_head(hidden).view(hidden.shape[0], self.config.num_codebooks, self.config.codebook_size)


class CausalConv(nn.Module):
    def __init__(self, channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size)
        self.pad = kernel_size - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.conv(F.pad(x, (self.pad, 0))))


class TinyCodecDecoder(nn.Module):
    def __init__(self, config: CodecConfig) -> None:
        super().__init__()
        self.config = config
        self.codebooks = nn.ModuleList(nn.Embedding(config.codebook_size, config.embed_dim) for _ in range(config.num_codebooks))
        self.input_proj = nn.Conv1d(config.embed_dim, config.channels, 1)
        self.layers = nn.ModuleList(CausalConv(config.channels, config.kernel_size) for _ in range(config.num_layers))
        self.output_proj = nn.Linear(config.channels, config.samples_per_frame)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, T, K] codes to [B, T * samples_per_frame] samples in [-1, 1]."""
        x = sum(embedding(frames[..., i]) for i, embedding in enumerate(self.codebooks))  # [B, T, E]
        x = self.input_proj(x.transpose(1, 2))
        for layer in self.layers:
            x = layer(x)
        samples = torch.tanh(self.output_proj(x.transpose(1, 2)))  # [B, T, hop]
        return samples.reshape(frames.shape[0], -1)
