"""The stage models of the template family that the runtime calls: the talker as the AutoregressiveModel of
stage 0 and the codec decoder as the ChunkDecoder of stage 1, and the stage-0 input the adapter makes."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vocalis.stages.models._template.modules import TinyCodecDecoder, TinyTalker
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, sample_batch

POISON = "\a"
"""A character the talker refuses at start (lets tests give one request an input its stage fails on)."""


@dataclass(frozen=True)
class TinyInput:
    sampling: SamplingParams
    initial_codec_chunk_frames: int | None = None
    speaker: torch.Tensor | None = None
    """[SPEAKER_DIM] embedding of the voice to clone, if any."""
    ref_text: str = ""


class TinyTalkerModel(AutoregressiveModel):
    """The talker as the AutoregressiveModel of stage 0."""

    emits_eos_frame = False

    def __init__(self, talker: TinyTalker, max_len: int) -> None:
        self.talker = talker
        c = talker.config
        self.cache_shape = CacheShape(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, min(max_len, c.max_position_embeddings))

    def start(self, request: SynthesisRequest[TinyInput], payload: object = None) -> SequenceStart:
        if POISON in request.text:  # lets tests give one request an input the stage fails on
            raise ValueError("the tiny model cannot speak the BEL character")
        stage_input = request.stage_input
        ids = list((stage_input.ref_text + request.text).encode("utf-8")) + [self.talker.config.bos_token_id]
        embeds = self.talker.text_embedding(torch.tensor(ids))
        if stage_input.speaker is not None:
            embeds = torch.cat([self.talker.speaker_proj(stage_input.speaker)[None], embeds])
        return SequenceStart(embeds, stage_input.sampling)

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.talker(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[None]) -> torch.Tensor:
        return sample_batch(self.talker.logits(hidden), samplers, [h if h.numel() else None for h in histories])

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] == self.talker.config.eos_token_id

    def frame_embeds(self, frames: torch.Tensor, states: list[None]) -> torch.Tensor:
        return self.talker.embed_frames(frames)


class TinyCodecModel(ChunkDecoder):
    """The codec decoder as the ChunkDecoder of stage 1."""

    causal = True

    def __init__(self, codec: TinyCodecDecoder) -> None:
        self.codec = codec
        self.samples_per_frame = codec.config.samples_per_frame

    def start(self, request: SynthesisRequest[TinyInput]) -> DecodeStream:
        return DecodeStream(first_chunk_frames=request.stage_input.initial_codec_chunk_frames)

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        return self.codec(frames)
