"""Fish Audio's DAC as the stage pieces its families share (Fish Speech S2 Pro and Fish Audio Drama 3): their stage-0
input (the clip to clone), the reference encoder their PrepareStage runs, and the stateful chunk decoder of their
codec stage."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
from vocalis.stages.models.fish_common.fish_dac import FishDAC
from vocalis.stages.runtime.prepare import Preparer
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import CacheStats


@dataclass(frozen=True, eq=False)
class ClipInput:
    """Stage-0 input of a session, made by the adapter: the sampling, and the voice to clone, if any."""

    sampling: SamplingParams
    """The slow AR's semantic tokens; the codebook decoder samples its codes with the same settings, on its own stream."""
    ref_samples: np.ndarray | None = None
    """The voice to clone (mono float32) at `ref_rate`; the PrepareStage encodes it with the codec."""
    ref_rate: int = 0
    ref_text: str = ""


class ReferenceEncoder(Preparer):
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

    def caches(self) -> dict[str, CacheStats]:
        return self.cache.caches()

    def cached(self, samples: np.ndarray, rate: int) -> bool:
        """Whether the clip's frames are cached (encode() returns at once)."""
        return self.cache.has(content_key(samples, rate))

    def encode(self, samples: np.ndarray, rate: int) -> torch.Tensor:
        def run() -> torch.Tensor:
            audio = resample(np.asarray(samples, dtype=np.float32), rate, self.codec.sample_rate)
            device = next(self.codec.parameters()).device
            return self.codec.encode(torch.from_numpy(np.ascontiguousarray(audio))[None].to(device))[0].T.cpu()

        return self.cache.get_or_make(content_key(samples, rate), run)


def _codebooks(frames: torch.Tensor) -> torch.Tensor:
    """Frames [B, T, K] to the DAC's codes [B, K, T] (a batch's padding rows decode as code 0)."""
    return frames.transpose(1, 2).clamp(min=0)


def dac_decoder(codec: FishDAC) -> StatefulCodecDecoder:
    """The ChunkDecoder of the codec stage: frames [B, T, K] to samples [B, T * 2048] at 44.1 kHz, each request's
    chunks decoded from its carried codec state (`FishDAC.stream`)."""
    return StatefulCodecDecoder(codec, codec.samples_per_frame, codes=_codebooks, whole=codec.decode)
