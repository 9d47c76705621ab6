"""The OmniVoice language model: a Qwen3 stack run bidirectionally over text and audio tokens.

Inputs are [B, C, L] ids: text positions carry their token in row 0, audio positions one code
per codebook (summed embeddings). Every position sees every other one of its row (no causal
mask); shorter rows of a batch are right-padded and their padding is masked out of the keys.
Module and parameter names follow the published safetensors, so they load one to one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.models.omnivoice.config import BackboneConfig, OmniVoiceConfig


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, length: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(length, device=self.inv_freq.device).float()
        freqs = torch.outer(positions, self.inv_freq.float())
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(batch, length, self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(batch, length, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.num_heads // self.num_kv_heads
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class MLP(nn.Module):
    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """Qwen3Model without a causal mask (`llm.*` in the checkpoint)."""

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary = RotaryEmbedding(config.head_dim, config.rope_theta)

    def forward(self, embeds: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, H] of embeddings [B, L, H]; row b's positions from lengths[b] on are padding."""
        length = embeds.shape[1]
        cos, sin = self.rotary(length, embeds.dtype)
        keys = torch.arange(length, device=embeds.device)[None, :] < lengths.to(embeds.device)[:, None]
        mask = keys[:, None, None, :]  # [B, 1, 1, L]: every query of a row sees that row's real keys
        x = embeds
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)


class OmniVoiceLM(nn.Module):
    """Backbone plus the audio embedding table and audio heads: ids [B, C, L] to logits [B, C, L, V]."""

    def __init__(self, config: OmniVoiceConfig) -> None:
        super().__init__()
        self.config = config
        self.llm = Backbone(config.llm)
        vocab = config.num_audio_codebook * config.audio_vocab_size
        self.audio_embeddings = nn.Embedding(vocab, config.llm.hidden_size)
        self.audio_heads = nn.Linear(config.llm.hidden_size, vocab, bias=False)
        self.register_buffer(
            "codebook_layer_offsets", torch.arange(config.num_audio_codebook) * config.audio_vocab_size, persistent=True
        )

    def embed(self, ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """Input embeddings [B, L, H]: the text table at text positions, summed codebook rows at audio ones."""
        text = self.llm.embed_tokens(torch.where(audio_mask, 0, ids[:, 0, :]))
        shifted = ids * audio_mask[:, None, :] + self.codebook_layer_offsets.view(1, -1, 1)
        audio = self.audio_embeddings(shifted).sum(dim=1)
        return torch.where(audio_mask[..., None], audio, text)

    def forward(self, ids: torch.Tensor, audio_mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        hidden = self.llm(self.embed(ids, audio_mask), lengths)
        batch, length, _ = hidden.shape
        logits = self.audio_heads(hidden).view(batch, length, self.config.num_audio_codebook, self.config.audio_vocab_size)
        return logits.permute(0, 2, 1, 3)
