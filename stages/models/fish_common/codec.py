"""Fish Audio's DAC as the two stage pieces its families share (Fish Speech S2 Pro and Fish Audio Drama 3): the
reference encoder their PrepareStage runs, and the stateful chunk decoder of their codec stage."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.components.stateful_decode import decode_windows
from vocalis.stages.models.fish_common.fish_dac import FishDAC
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.request import SynthesisRequest


class ClipInput(Protocol):
    """What the encoder reads of a family's stage input: the clip to clone, if any."""

    ref_samples: np.ndarray | None
    ref_rate: int


class ReferenceEncoder:
    """The Preparer of the pipeline's first stage: a request's reference clip to its frames [F, K] with the codec's
    encoder (resampled to its rate), cached by content, on a thread of its own while the slow AR keeps stepping."""

    def __init__(self, codec: FishDAC) -> None:
        self.codec = codec
        self.cache: ReferenceCache[torch.Tensor] = ReferenceCache()

    def prepare(self, request: SynthesisRequest[ClipInput]) -> torch.Tensor | None:
        inputs = request.stage_input
        return None if inputs.ref_samples is None else self.encode(inputs.ref_samples, inputs.ref_rate)

    def costly(self, request: SynthesisRequest[ClipInput]) -> bool:
        inputs = request.stage_input
        return inputs.ref_samples is not None and not self.cached(inputs.ref_samples, inputs.ref_rate)

    def cached(self, samples: np.ndarray, rate: int) -> bool:
        """Whether the clip's frames are cached (encode() returns at once)."""
        return self.cache.has(content_key(samples, rate))

    def encode(self, samples: np.ndarray, rate: int) -> torch.Tensor:
        def run() -> torch.Tensor:
            audio = resample(np.asarray(samples, dtype=np.float32), rate, self.codec.sample_rate)
            device = next(self.codec.parameters()).device
            return self.codec.encode(torch.from_numpy(np.ascontiguousarray(audio))[None].to(device))[0].T.cpu()

        return self.cache.get_or_make(content_key(samples, rate), run)


class CodecDecoderModel(ChunkDecoder):
    """Frames [B, T, K] to samples [B, T * 2048] at 44.1 kHz with the shared DAC.

    Each request's chunks are decoded from its carried codec state (`FishDAC.stream`): a streamed request equals the
    decode of all its frames at once, and a chunk costs its own frames (the window's left context is not read)."""

    causal = True

    def __init__(self, codec: FishDAC) -> None:
        self.codec = codec
        self.samples_per_frame = codec.samples_per_frame

    def start(self, request: SynthesisRequest) -> DecodeStream:
        return DecodeStream()

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        device = next(self.codec.parameters()).device

        def codes(f: torch.Tensor) -> torch.Tensor:
            return f.to(device).transpose(1, 2).clamp(min=0)

        return decode_windows(frames, streams, self.samples_per_frame,
                              lambda f, states, counts: self.codec.stream(codes(f), states, counts), lambda f: self.codec.decode(codes(f)))
