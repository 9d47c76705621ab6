"""Speech tokens to waveform through flow matching and the HiFT vocoder, as a ChunkStage decoder: written once for the
families whose second stage is flow matching + HiFT: CosyVoice3 (`CausalMaskedDiffWithDiT` + `CausalHiFTGenerator`) and
GLM-TTS (`GLMFlow` + the centred `HiFTGenerator`).

Each request's stream carries its conditioning (prompt speech tokens, prompt mel, speaker embedding). A chunk is
decoded from the request's first token (the DiT's chunk-causal attention reaches back to the start: configure
`left_context_frames` to cover the longest utterance) through its lookahead, and only the chunk's own samples leave.
With at least `exact_lookahead_tokens` of lookahead every emitted sample equals the whole-utterance decode's: the
chunk-causal DiT lets a mel frame see to the end of its attention chunk, the pre-lookahead convolution reads
`pre_lookahead_len` tokens further, and the vocoder reads 5 mel frames ahead. The streamed output is the published
streaming's (which re-runs flow and vocoder over the whole prefix, too), without its approximation at chunk ends.
GLM-TTS has no such bound (its DiT attends to, and its GRN normalises over, the whole utterance): its chunk ends
approximate the whole decode, closer the longer the lookahead, as the published streaming's do.
Rows are decoded one at a time: prompts differ in length per request, and a row's output never depends on its batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from vocalis.stages.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.layers.flow_matching import CausalMaskedDiffWithDiT
from vocalis.stages.layers.glm_dit import GLMFlow
from vocalis.stages.layers.hift import CausalHiFTGenerator
from vocalis.stages.request import SynthesisRequest

HIFT_LOOKAHEAD_MEL = 5
"""Mel frames ahead that a vocoder sample depends on: conv_pre's 4 (look-right), the iSTFT's overlap one more."""


@dataclass(frozen=True, eq=False)
class FlowConditioning:
    prompt_tokens: torch.Tensor
    """[P] speech tokens of the voice's clip."""
    prompt_mel: torch.Tensor
    """[P * token_mel_ratio, mel_dim] its mel."""
    embedding: torch.Tensor
    """[E] its speaker embedding."""


class FlowVocoderDecoder(ChunkDecoder):
    causal = False  # rows are grouped by window length, never right-padded with tokens that are not there

    def __init__(self, flow: CausalMaskedDiffWithDiT | GLMFlow, hift: CausalHiFTGenerator, conditioning: Callable[[SynthesisRequest], FlowConditioning],
                 n_timesteps: int = 10, first_chunk: Callable[[SynthesisRequest], int | None] | None = None) -> None:
        self.flow, self.hift = flow, hift
        self.conditioning = conditioning
        self.first_chunk = first_chunk
        self.n_timesteps = n_timesteps
        self.samples_per_frame = flow.token_mel_ratio * hift.samples_per_frame

    @property
    def exact_lookahead_tokens(self) -> int | None:
        """Tokens of lookahead with which a stream equals the whole-utterance decode; None where no finite lookahead
        does (GLM-TTS: its DiT attends to, and its GRN normalises over, the whole utterance)."""
        ratio = self.flow.token_mel_ratio
        if not isinstance(self.flow, CausalMaskedDiffWithDiT):
            return None
        chunk = max(self.flow.decoder.estimator.static_chunk_size, 1)
        vocoder = getattr(self.hift, "lookahead_mel", HIFT_LOOKAHEAD_MEL)
        return math.ceil((chunk - 1) / ratio) + self.flow.pre_lookahead_layer.pre_lookahead_len + math.ceil(vocoder / ratio)

    def start(self, request: SynthesisRequest) -> DecodeStream:
        first = self.first_chunk(request) if self.first_chunk is not None else None
        return DecodeStream(first_chunk_frames=first, conditioning=self.conditioning(request))

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        return torch.stack([self.decode_one(frames[row].reshape(-1), stream.conditioning) for row, stream in enumerate(streams)])

    def decode_one(self, tokens: torch.Tensor, conditioning: FlowConditioning, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Samples [T * samples_per_frame] of tokens [T] after the voice's prompt."""
        device = next(self.flow.parameters()).device
        mel = self.flow.inference(
            tokens.to(device).long()[None], conditioning.prompt_tokens.to(device).long()[None], conditioning.prompt_mel.to(device)[None],
            conditioning.embedding.to(device).float()[None], self.n_timesteps, noise,
        )
        return self.hift(mel.to(self.hift.conv_pre.weight.dtype))[0]
