"""The OmniVoice language model: a Qwen3 stack run bidirectionally over text and audio tokens.

Inputs are [B, C, L] ids: text positions carry their token in row 0, audio positions one code
per codebook (summed embeddings). Every position sees every other one of its row (no causal
mask); shorter rows of a batch are right-padded and their padding is masked out of the keys.
Module and parameter names follow the published safetensors, so they load one to one.
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.layers.transformer import gated_decoder_layers
from vocalis.stages.models.omnivoice.config import BackboneConfig, OmniVoiceConfig


class Backbone(nn.Module):
    """Qwen3Model without a causal mask (`llm.*` in the checkpoint)."""

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.config = config
        self.layers = gated_decoder_layers(config, qk_norm=True)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, embeds: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, H] of embeddings [B, L, H]; row b's positions from lengths[b] on are padding."""
        length = embeds.shape[1]
        cos, sin = rope(torch.arange(length, device=embeds.device), self.config.head_dim, self.config.rope_theta)
        keys = torch.arange(length, device=embeds.device)[None, :] < lengths.to(embeds.device)[:, None]
        mask = keys[:, None, None, :]  # [B, 1, 1, L]: every query of a row sees that row's real keys
        x = embeds
        for layer in self.layers:
            x = layer.dense(x, (cos, sin), mask)
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
