"""Stage 0's network: the frozen Qwen2.5-Omni thinker (text decoder and audio tower), prefill only, and the layer
fusion that turns its hidden states into AuK's condition.

Audio and text share one position axis in the thinker's multimodal RoPE when there is no image or video (all
three sections get the same position), so plain RoPE over positions 0..L-1 is the same rotation. The condition is
softmax(layer_weights)-weighted layer norms of every decoder layer's output (the last one after the final norm),
times layer_scale. Attribute names are the Qwen snapshot's (`thinker.model.*`, `thinker.audio_tower.*`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.whisper import WhisperEncoderLayer
from vocalis.stages.layers.attention import QKVAttention, causal_mask
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.layers.transformer import PreNormDecoderLayer
from vocalis.stages.models.auk.config import AudioConfig, TextConfig


class AudioEncoderLayer(WhisperEncoderLayer):
    def __init__(self, config: AudioConfig) -> None:
        super().__init__(config.d_model, config.encoder_attention_heads, config.encoder_ffn_dim)


def sinusoids(length: int, channels: int, max_timescale: float = 10000) -> torch.Tensor:
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-increment * torch.arange(channels // 2).float())
    scaled = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([scaled.sin(), scaled.cos()], dim=1)


def audio_token_count(mel_frames: int) -> int:
    """Thinker tokens of a clip of `mel_frames` features (stride-2 conv, then stride-2 pooling)."""
    return ((mel_frames - 1) // 2 + 1 - 2) // 2 + 1


class AudioTower(nn.Module):
    """Whisper-style encoder over windows of 2 x n_window mel frames (each attended alone), pooled x2, projected."""

    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        self.config = config
        dim = config.d_model
        self.conv1 = nn.Conv1d(config.num_mel_bins, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(config.max_source_positions, dim), persistent=False)
        self.layers = nn.ModuleList(AudioEncoderLayer(config) for _ in range(config.encoder_layers))
        self.ln_post = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, config.output_dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """[audio_token_count(frames), output_dim] of one clip's features [mels, frames]."""
        window = self.config.n_window * 2
        frames = features.shape[1]
        chunks = list(features.split(window, dim=1))
        lengths = torch.tensor([c.shape[1] for c in chunks], device=features.device)
        padded = torch.stack([F.pad(c, (0, window - c.shape[1])) for c in chunks]) if len(chunks) > 1 else chunks[0][None]
        valid = (torch.arange(padded.shape[2], device=features.device)[None] < lengths[:, None])[:, None]
        h = F.gelu(self.conv1(padded.to(self.conv1.weight.dtype))) * valid
        h = F.gelu(self.conv2(h)).transpose(1, 2)
        h = h + self.positions[: h.shape[1]].to(h.dtype)
        after = (lengths - 1) // 2 + 1
        keys = torch.arange(h.shape[1], device=h.device)[None] < after[:, None]
        for layer in self.layers:
            h = layer(h, keys[:, None, None])
        h = h[keys]  # the valid positions of every window, in order
        pooled = audio_token_count(frames)
        h = (h[0: 2 * pooled: 2] + h[1: 2 * pooled: 2]) / 2
        return self.proj(self.ln_post(h))


class ThinkerTextModel(nn.Module):
    """`embed_tokens`, the Qwen2 decoder layers (q/k/v bias, no o_proj bias), `norm`."""

    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList()
        for _ in range(config.num_hidden_layers):
            attention = QKVAttention(config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim, bias=True)
            attention.o_proj = nn.Linear(config.num_attention_heads * config.head_dim, config.hidden_size, bias=False)
            mlp = GatedMLP(config.hidden_size, config.intermediate_size)
            self.layers.append(PreNormDecoderLayer(config.hidden_size, attention, mlp, lambda d: RMSNorm(d, config.rms_norm_eps)))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def layer_outputs(self, embeds: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """[B, layers, L, hidden]: each layer's output (the last one normed) for right-padded rows [B, L, hidden]."""
        b, length, _ = embeds.shape
        cos, sin = rope(torch.arange(length, device=embeds.device), self.config.head_dim, self.config.rope_theta)
        mask = causal_mask(length, device=embeds.device)[None] & (torch.arange(length, device=embeds.device)[None, :] < lengths[:, None])[:, None]
        mask = mask | torch.eye(length, dtype=torch.bool, device=embeds.device)[None]  # padded queries see themselves
        h, outputs = embeds, []
        for layer in self.layers:
            h = layer.dense(h, (cos, sin), mask[:, None])
            outputs.append(h)
        outputs[-1] = self.norm(h)
        return torch.stack(outputs, dim=1)


class Thinker(nn.Module):
    def __init__(self, text: TextConfig, audio: AudioConfig) -> None:
        super().__init__()
        self.model = ThinkerTextModel(text)
        self.audio_tower = AudioTower(audio)


def fuse(layers: torch.Tensor, layer_weights: torch.Tensor, layer_scale: torch.Tensor) -> torch.Tensor:
    """AuK's condition [..., L, hidden] of layer outputs [..., layers, L, hidden]."""
    normed = F.layer_norm(layers.float(), layers.shape[-1:])
    weights = F.softmax(layer_weights.float(), dim=0)
    return (normed * weights[:, None, None]).sum(dim=-3) * layer_scale.float()


class ConditionEncoder(nn.Module):
    """The thinker plus AuK's fusion tensors (`layer_weights`, `layer_scale`, stored with the DiT)."""

    def __init__(self, text: TextConfig, audio: AudioConfig) -> None:
        super().__init__()
        self.thinker = Thinker(text, audio)
        self.layer_weights = nn.Parameter(torch.zeros(text.num_hidden_layers))
        self.layer_scale = nn.Parameter(torch.ones(1))

    def forward(self, ids: list[torch.Tensor], audio: list[torch.Tensor | None], audio_token_id: int) -> list[torch.Tensor]:
        """The condition [L_i, hidden] of each prompt's ids [L_i], its audio placeholders filled by the tower's
        output for its clip's features (or None)."""
        model = self.thinker.model
        rows = []
        for row_ids, features in zip(ids, audio, strict=True):
            embeds = model.embed_tokens(row_ids)
            if features is not None:
                slots = row_ids == audio_token_id
                embeds = embeds.masked_scatter(slots[:, None], self.thinker.audio_tower(features).to(embeds.dtype))
            rows.append(embeds)
        lengths = torch.tensor([len(r) for r in rows], device=rows[0].device)
        padded = nn.utils.rnn.pad_sequence(rows, batch_first=True)
        fused = fuse(model.layer_outputs(padded, lengths), self.layer_weights, self.layer_scale)
        return [fused[i, : len(r)] for i, r in enumerate(rows)]
