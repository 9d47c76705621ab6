"""Gepard's talker: a Qwen3.5 hybrid backbone, 32 FSQ codebook heads sampled in-model, a binary stop head.

Published tensor names: `model.*` (the backbone), `audio_embeddings.<i>.weight`, `audio_embed_proj.{0,2}.*` (Linear,
GELU, Linear, affine-free LayerNorm), `audio_embed_scale`, `codebook_heads.<i>.*`, `stop_head.*`, `null_prefix`.
The voice-clone `ref_compressor.*` (cloning is not served: the peer has it "not available yet") and the
training-only `aligner.*`, `supcon_head.*` and `mtp.*` are declared unused.

Per step, from the last hidden state: every head's logits divided by the temperature (0.3) plus Gumbel noise,
argmax (one frame of 32 per-dimension FSQ codes), and sigmoid(stop_head) > 0.5 ends the sequence; the frame that
decides a stop is not emitted, and the first frame (sampled at start-of-speech) never stops. A seeded request
draws its noise from its own generator, one [heads, max level] draw per step whatever its batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from vocalis.stages.components.hybrid import HybridDecoder
from vocalis.stages.models.gepard.config import GepardConfig
from vocalis.stages.models.gepard.prompt import prompt_ids
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams

UNUSED = (r"ref_compressor\..*", r"aligner\..*", r"supcon_head\..*", r"mtp\..*")
"""Published tensors the server has no use for, by design (see the module docstring)."""


class GepardTalker(nn.Module):
    def __init__(self, config: GepardConfig) -> None:
        super().__init__()
        self.config = config
        hidden = config.backbone.hidden_size
        self.model = HybridDecoder(config.backbone)
        self.audio_embeddings = nn.ModuleList(nn.Embedding(levels, config.audio_embed_dim) for levels in config.audio_levels)
        self.audio_embed_proj = nn.Sequential(
            nn.Linear(config.num_heads * config.audio_embed_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden),
            nn.LayerNorm(hidden, elementwise_affine=False),
        )
        self.audio_embed_scale = nn.Parameter(torch.ones(1), requires_grad=False)
        self.codebook_heads = nn.ModuleList(nn.Linear(hidden, levels) for levels in config.audio_levels)
        self.stop_head = nn.Linear(hidden, 1)
        self.null_prefix = nn.Parameter(torch.zeros(config.num_speaker_prefix, hidden))
        width = max(config.audio_levels)
        padding = torch.full((config.num_heads, width), float("-inf"))
        for i, levels in enumerate(config.audio_levels):
            padding[i, :levels] = 0.0
        self.register_buffer("_padding", padding, persistent=False)

    def prompt_embeds(self, ids: list[int]) -> torch.Tensor:
        """[P, H]: token embeddings, the speaker slots taking the default voice's rows (`null_prefix`)."""
        tensor = torch.tensor(ids, device=self.null_prefix.device)
        base = self.config.speaker_token_base
        slot = (tensor >= base) & (tensor < base + self.config.num_speaker_prefix)
        embeds = self.model.embed_tokens(torch.where(slot, 0, tensor))
        return torch.where(slot[:, None], self.null_prefix[(tensor - base).clamp(0, self.config.num_speaker_prefix - 1)].to(embeds.dtype),
                           embeds)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, heads, max level] float32, levels past each head's own at -inf."""
        width = self._padding.shape[1]
        rows = [nn.functional.pad(head(hidden).float(), (0, width - head.out_features)) for head in self.codebook_heads]
        return torch.stack(rows, dim=1) + self._padding

    def stop_probability(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.stop_head(hidden).float())[:, 0]

    def frame_embeds(self, codes: torch.Tensor) -> torch.Tensor:
        """[B, H] input embedding of frames of codes [B, heads]."""
        parts = [table(codes[:, i]) for i, table in enumerate(self.audio_embeddings)]
        frame = self.audio_embed_proj(torch.cat(parts, dim=-1))
        return frame * self.audio_embed_scale.to(frame.dtype)


def gumbel_codes(logits: torch.Tensor, temperature: float, generators: list[torch.Generator | None]) -> torch.Tensor:
    """Gumbel-max draws [B, heads] from logits [B, heads, width]; row i's noise comes from generators[i] (None: the
    global generator), one [heads, width] draw each, so a seeded row does not depend on its batch."""
    if temperature <= 0:
        return logits.argmax(-1)
    shape = logits.shape[1:]
    uniform = torch.stack([torch.rand(shape, generator=g, dtype=torch.float32, device=logits.device) for g in generators])
    noise = -torch.log(-torch.log(uniform.clamp_min(1e-20)))
    return (logits / temperature + noise).argmax(-1)


@dataclass
class GepardSequence:
    frames_sampled: int = 0


class GepardModel(AutoregressiveModel):
    """The talker as an AutoregressiveModel: frames are [32] FSQ codes; the stop head ends a sequence."""

    emits_eos_frame = False

    def __init__(self, talker: GepardTalker, encode: Callable[[str], list[int]], max_len: int) -> None:
        self.talker = talker
        self.encode = encode
        self.cache_shape = talker.model.cache_shape(max_len)
        self.state_shape = talker.model.state_shape()
        self._stops: torch.Tensor | None = None

    def start(self, request: SynthesisRequest, payload: object = None) -> SequenceStart:
        params: SamplingParams = request.stage_input.sampling
        ids = prompt_ids(self.encode(request.text), self.talker.config)
        return SequenceStart(self.talker.prompt_embeds(ids), params, GepardSequence())

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: PagedKVCache) -> torch.Tensor:
        return self.talker.model.cached(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[GepardSequence]) -> torch.Tensor:
        """Codes [B, 32]; the stop decisions of these rows are kept for `is_eos`, which the stage calls next."""
        config = self.talker.config
        generators = [s.generator_for(hidden.device) for s in samplers]
        codes = gumbel_codes(self.talker.logits(hidden), config.temperature, generators)
        first = torch.tensor([s.frames_sampled == 0 for s in states], device=hidden.device)
        self._stops = (self.talker.stop_probability(hidden) > config.stop_threshold) & ~first
        for s in states:
            s.frames_sampled += 1
        return codes

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        stops, self._stops = self._stops, None
        assert stops is not None and len(stops) == len(frames), "is_eos follows the sample_frames of the same step"
        return stops

    def frame_embeds(self, frames: torch.Tensor, states: list[GepardSequence]) -> torch.Tensor:
        return self.talker.frame_embeds(frames)
