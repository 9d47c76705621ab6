"""The template family's ModelAdapter: its one voice, the fields it honours, its extra params, and the stage-0
input of a request (on the event loop: no forward pass here)."""

from __future__ import annotations

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.model import Capabilities
from vocalis.stages.models._template.config import TinyConfig
from vocalis.stages.models._template.modules import SPEAKER_DIM
from vocalis.stages.models._template.runtime import TinyInput
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "tiny"
EXTRA_PARAMS = ExtraParams("tiny_tts", [
    ExtraParam("temperature", float, "sampling temperature (default 0: greedy)", minimum=0),
    ExtraParam("top_k", int, "sampling top-k (0 keeps all)", minimum=0),
    ExtraParam("top_p", float, "nucleus sampling", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("repetition_penalty", float, "penalty on frames already generated (1 is none)", minimum=0, exclusive_minimum=True),
])


def speaker_embedding(reference: ReferenceAudio) -> torch.Tensor:
    """The tiny family's "speaker encoder": the normalized loudness contour of the clip in 16 segments."""
    stored = reference.artifacts.get("speaker_embedding")
    if stored is not None:
        if len(stored) != SPEAKER_DIM:
            raise InvalidField("voice", "EMBEDDING_SIZE", f"speaker embeddings of this model have {SPEAKER_DIM} values, not {len(stored)}")
        return torch.as_tensor(np.asarray(stored, dtype=np.float32))
    segments = np.array_split(np.asarray(reference.samples, dtype=np.float64), SPEAKER_DIM)
    contour = np.array([np.sqrt(np.mean(seg**2)) if len(seg) else 0.0 for seg in segments])
    return torch.as_tensor((contour / (contour.max() + 1e-9)).astype(np.float32))


class TinyAdapter:
    def __init__(self, config: TinyConfig) -> None:
        self.capabilities = Capabilities(
            sample_rate=config.codec.sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset(
                {"seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params", "ref_audio", "ref_text"}
            ),
            extra_params=tuple(EXTRA_PARAMS),
            voice_cloning=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", "default", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> TinyInput:
        fields = params.fields
        settings = {"temperature": 0.0, **EXTRA_PARAMS.parse(fields.get("extra_params"))}
        try:
            sampling = SamplingParams(**settings, seed=fields.get("seed"), max_new_tokens=int(fields.get("max_new_tokens", 200)))
        except ValueError as error:
            raise InvalidField("max_new_tokens", "OUT_OF_RANGE", str(error)) from error
        reference = params.reference
        if reference is None:
            if "ref_text" in fields:
                raise InvalidField("ref_text", "REF_AUDIO_REQUIRED", "ref_text needs ref_audio or a cloned voice")
            return TinyInput(sampling, fields.get("initial_codec_chunk_frames"))
        return TinyInput(sampling, fields.get("initial_codec_chunk_frames"), speaker_embedding(reference), reference.text or "")
