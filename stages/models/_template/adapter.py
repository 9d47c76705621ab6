"""The template family's ModelAdapter: its one voice, the fields it honours, its extra params, and the stage-0
input of a request (on the event loop: no forward pass here)."""

from __future__ import annotations

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import SamplingTable, StandardAdapter, Voices
from vocalis.stages.models._template.config import TinyConfig
from vocalis.stages.models._template.modules import SPEAKER_DIM
from vocalis.stages.models._template.runtime import TinyInput
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

VOICE = "tiny"
DEFAULTS = {"temperature": 0.0, "max_new_tokens": 200}
"""Greedy unless asked: the template's tests compare runs."""
SAMPLING = SamplingTable.same_names("temperature", "top_k", "top_p", "repetition_penalty")


def speaker_embedding(reference: ReferenceAudio) -> torch.Tensor:
    """The tiny family's "speaker encoder": the normalized loudness contour of the clip in 16 segments."""
    stored = reference.artifacts.get("speaker_embedding")
    if stored is not None:
        if len(stored) != SPEAKER_DIM:
            raise InvalidField("voice", "EMBEDDING_SIZE", f"speaker embeddings of this model have {SPEAKER_DIM} values, not {len(stored)}")
        return torch.as_tensor(np.asarray(stored, dtype=np.float32))
    if reference.samples is None or len(reference.samples) == 0:
        raise InvalidField("voice" if reference.name else "ref_audio", "VOICE_NOT_SUPPORTED", "the voice has no audio and no speaker embedding")
    segments = np.array_split(np.asarray(reference.samples, dtype=np.float64), SPEAKER_DIM)
    contour = np.array([np.sqrt(np.mean(seg**2)) if len(seg) else 0.0 for seg in segments])
    return torch.as_tensor((contour / (contour.max() + 1e-9)).astype(np.float32))


class TinyAdapter(StandardAdapter[TinyInput]):
    """The standard adapter plus the template's one quirk: a clone is its clip's loudness contour (or a stored
    speaker embedding), with an optional transcript."""

    MODEL = "tiny_tts"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("temperature", float, "sampling temperature (default 0: greedy)", minimum=0),
        ExtraParam("top_k", int, "sampling top-k (0 or -1 keep all)", minimum=-1),
        ExtraParam("top_p", float, "nucleus sampling", minimum=0, maximum=1, exclusive_minimum=True),
        ExtraParam("repetition_penalty", float, "penalty on frames already generated (1 is none)", minimum=0, exclusive_minimum=True),
    ])
    REFERENCE = ReferencePolicy(MODEL, transcript=False, audio=False)
    """Cloning is optional; the transcript too; a stored speaker embedding stands in for the clip."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__(sample_rate=config.codec.sample_rate, voices=Voices.single(VOICE),
                         fields={"seed", "max_new_tokens", "initial_codec_chunk_frames", "ref_text"})

    def stage_input(self, params: RequestParams) -> TinyInput:
        request = self.prologue(params)
        sampling = SAMPLING.params(request.extra, DEFAULTS, seed=request.seed,
                                   max_new_tokens=request.max_new_tokens)
        reference = request.reference
        if reference is None:
            return TinyInput(sampling, request.initial_codec_chunk_frames)
        return TinyInput(sampling, request.initial_codec_chunk_frames, speaker_embedding(reference), reference.text or "")
