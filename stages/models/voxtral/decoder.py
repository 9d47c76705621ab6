"""The Ministral-class decoder over text and audio-code embeddings, and the acoustic flow-matching transformer.

Both are the floor's Llama-family layers (RMSNorm, GQA attention without bias, SiLU gated MLP); `weights.py` maps
the Mistral checkpoint names (`attention.wq`, `feed_forward.w1`, `attention_norm`, ...) onto them. The decoder runs
causally over the runtime's KV cache with RoPE; the flow transformer is bidirectional over three tokens and has no
position encoding.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.layers.transformer import gated_decoder_layer
from vocalis.stages.models.voxtral.config import AUDIO_SPECIALS, EMPTY_AUDIO, AcousticArgs, DecoderArgs, VoxtralConfig
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache


class MistralDecoder(nn.Module):
    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(
            gated_decoder_layer(args.dim, args.n_heads, args.n_kv_heads, args.head_dim, args.hidden_dim, args.norm_eps)
            for _ in range(args.n_layers)
        )
        self.norm = RMSNorm(args.dim, args.norm_eps)

    def cached(self, x: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Final-normed hidden states [T, dim] of flattened step tokens x [T, dim]."""
        cos_sin = rope(batch.token_positions.to(x.device), self.args.head_dim, self.args.rope_theta)
        for i, layer in enumerate(self.layers):
            x = layer.cached(x, cos_sin, cache, i, batch)
        return self.norm(x)

    def dense(self, x: torch.Tensor) -> torch.Tensor:
        """Causal pass over whole rows x [B, L, dim] (tests and goldens)."""
        length = x.shape[1]
        cos_sin = rope(torch.arange(length, device=x.device), self.args.head_dim, self.args.rope_theta)
        mask = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        for layer in self.layers:
            x = layer.dense(x, cos_sin, mask)
        return self.norm(x)


def time_embedding(t: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
    """Sinusoidal embedding [N, dim] of flow times t [N]: cos then sin of t * theta^(-k / (dim/2))."""
    half = dim // 2
    inv_freq = torch.exp(-math.log(theta) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    angles = t.float()[:, None] * inv_freq
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


class AcousticFlow(nn.Module):
    """`acoustic_transformer.*`: semantic logits from the decoder's hidden state, and the 36 acoustic values of the frame
    by flow matching (Euler from x_0 = noise, t 0 -> 1, classifier-free guidance against a zeroed condition)."""

    def __init__(self, args: AcousticArgs, n_acoustic: int, levels: int, semantic_logits: int, semantic_codes: int) -> None:
        super().__init__()
        self.args = args
        self.levels = levels
        self.semantic_codes = semantic_codes
        self.input_projection = nn.Linear(n_acoustic, args.dim, bias=False)
        self.time_projection = nn.Linear(args.dim, args.dim, bias=False)
        self.llm_projection = nn.Linear(args.input_dim, args.dim, bias=False)
        self.semantic_codebook_output = nn.Linear(args.dim, semantic_logits, bias=False)
        self.acoustic_codebook_output = nn.Linear(args.dim, n_acoustic, bias=False)
        self.layers = nn.ModuleList(
            gated_decoder_layer(args.dim, args.n_heads, args.n_kv_heads, args.head_dim, args.hidden_dim, args.norm_eps)
            for _ in range(args.n_layers)
        )
        self.norm = RMSNorm(args.dim, args.norm_eps)

    def semantic(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits [B, semantic_logits] with [EMPTY_AUDIO] and the padding rows masked: [END_AUDIO] may win."""
        logits = self.semantic_codebook_output(hidden).float()
        logits[:, EMPTY_AUDIO] = -math.inf
        logits[:, AUDIO_SPECIALS + self.semantic_codes :] = -math.inf
        return logits

    def velocity(self, x: torch.Tensor, t_proj: torch.Tensor, llm_proj: torch.Tensor) -> torch.Tensor:
        """v [N, n_acoustic] at x [N, n_acoustic], given projected time [N, dim] and condition [N, dim]."""
        h = torch.stack([self.input_projection(x), t_proj, llm_proj], dim=1)
        for layer in self.layers:
            h = layer.dense(h, None)
        return self.acoustic_codebook_output(self.norm(h)[:, 0])

    def sample(self, hidden: torch.Tensor, noise: torch.Tensor, cfg_alpha: torch.Tensor, steps: int) -> torch.Tensor:
        """Acoustic values in [-1, 1], [B, n_acoustic], from decoder states [B, input_dim], x_0 noise and per-row CFG."""
        b = hidden.shape[0]
        times = torch.linspace(0, 1, steps + 1, device=hidden.device)
        t_proj = self.time_projection(time_embedding(times, self.args.dim, self.args.time_theta).to(hidden.dtype))
        condition = self.llm_projection(torch.cat([hidden, torch.zeros_like(hidden)]))
        alpha = cfg_alpha.to(hidden.device, hidden.dtype)[:, None]
        x = noise.to(hidden.dtype)
        for i in range(steps):
            v = self.velocity(torch.cat([x, x]), t_proj[i].expand(2 * b, -1), condition)
            v = alpha * v[:b] + (1 - alpha) * v[b:]
            x = x + v * (times[i + 1] - times[i]).to(x.dtype)
        return x.clamp(-1, 1)

    def quantize(self, values: torch.Tensor) -> torch.Tensor:
        """FSQ codes (with the audio specials' offset) of values in [-1, 1]."""
        return (((values + 1) / 2) * (self.levels - 1)).round().long() + AUDIO_SPECIALS


class AudioCodeEmbeddings(nn.Module):
    """`mm_audio_embeddings.audio_codebook_embeddings.embeddings`: one table for the 37 codebooks stacked; a frame's
    input embedding is the sum of its codes' rows."""

    def __init__(self, config: VoxtralConfig) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(config.audio_embeddings, config.decoder.dim)
        sizes = config.codebook_sizes
        self.register_buffer("offsets", torch.tensor([sum(sizes[:i]) for i in range(len(sizes))]), persistent=False)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, K] codes (specials' offset included) -> [B, dim]."""
        return self.embeddings(frames + self.offsets).sum(dim=-2)


class VoxtralLM(nn.Module):
    """Everything of stage 0: decoder, audio-code embeddings and acoustic flow."""

    def __init__(self, config: VoxtralConfig) -> None:
        super().__init__()
        self.config = config
        self.decoder = MistralDecoder(config.decoder)
        self.audio_embeddings = AudioCodeEmbeddings(config)
        self.flow = AcousticFlow(config.acoustic, config.n_acoustic, config.acoustic_levels, config.semantic_logits,
                                 config.semantic_codebook_size)
