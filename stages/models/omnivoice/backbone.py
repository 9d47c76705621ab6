"""The OmniVoice language model: a Qwen3 stack run bidirectionally over text and audio tokens.

Inputs are [B, C, L] ids: text positions carry their token in row 0, audio positions one code
per codebook (summed embeddings). Every position sees every other one of its segment (no causal
mask). A row may hold several segments, each with positions from 0: the server packs a request's
conditional and unconditional prompts into one row, so that the shorter is not padded to the
longer's length (16 % of a step's rows at the reference's text length). Right padding is a segment
of its own, seen by no real position. Module and parameter names follow the published safetensors,
so they load one to one.
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

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, H] of embeddings [B, L, H] at `positions` [B, L]; a position attends to those of its
        row with the same segment id ([B, L])."""
        cos, sin = rope(positions.to(embeds.device), self.config.head_dim, self.config.rope_theta)
        segments = segments.to(embeds.device)
        mask = (segments[:, :, None] == segments[:, None, :])[:, None]  # [B, 1, L, L]
        x = embeds
        for layer in self.layers:
            x = layer.dense(x, (cos, sin), mask)
        return self.norm(x)


def packed_rows(rows: list[list[int]], device: torch.device | str = "cpu", length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions and segment ids [B, L] of rows that each hold segments of the given lengths one after another
    (positions from 0 in each), right-padded to `length` (default: the longest row's) with a segment of its own."""
    longest = max(sum(lengths) for lengths in rows) if length is None else length
    positions = torch.zeros(len(rows), longest, dtype=torch.long, device=device)
    segments = torch.full((len(rows), longest), -1, dtype=torch.long, device=device)
    for b, lengths in enumerate(rows):
        start = 0
        for i, n in enumerate(lengths):
            positions[b, start : start + n] = torch.arange(n, device=device)
            segments[b, start : start + n] = i
            start += n
    return positions, segments


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
        """Logits of right-padded rows (one segment each; row b's positions from lengths[b] on are padding)."""
        positions, segments = packed_rows([[n] for n in lengths.tolist()], ids.device, ids.shape[-1])
        hidden = self.llm(self.embed(ids, audio_mask), positions, segments)
        batch, length, _ = hidden.shape
        logits = self.audio_heads(hidden).view(batch, length, self.config.num_audio_codebook, self.config.audio_vocab_size)
        return logits.permute(0, 2, 1, 3)
