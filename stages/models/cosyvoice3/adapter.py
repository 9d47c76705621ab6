"""Which request fields CosyVoice3 honours, and how a request becomes its stage-0 input.

Every request clones: `ref_audio` + `ref_text`, or a stored voice with its transcript (400 otherwise, with the peer's
messages). Sampling is RAS by default (top_p 0.8, top_k 25, window 10, as published); `extra_params.sampler =
"standard"` switches to temperature/top-k/top-p with a repetition penalty (the peer's H200 profile: 0.7, 20, 0.8, 1.21).
"""

from __future__ import annotations

from vocalis.stages.api.extra_params import ExtraParams
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config
from vocalis.stages.models.cosyvoice3.frontend import MAX_REFERENCE_SECONDS, RECOMMENDED_SECONDS
from vocalis.stages.models.cosyvoice3.runtime import CosyVoice3Input
from vocalis.stages.models.cosyvoice_common.sampler_choice import SamplerChoice
from vocalis.stages.models.cosyvoice_common.voice_prompt import clone_input
from vocalis.stages.runtime.request import RequestParams

STANDARD = SamplerChoice("standard", "temperature, top-k, top-p and repetition penalty",
                         {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.21})


class CosyVoice3Adapter(StandardAdapter[CosyVoice3Input]):
    MODEL = "CosyVoice3"
    EXTRA_PARAMS = ExtraParams(MODEL, STANDARD.extra_params())
    REFERENCE = ReferencePolicy(MODEL, required=True, max_seconds=MAX_REFERENCE_SECONDS, recommended_seconds=RECOMMENDED_SECONDS)
    """The speech tokenizer takes at most 30 s; 3 to 10 s clone best."""

    def __init__(self, config: CosyVoice3Config) -> None:
        self.config = config
        super().__init__(sample_rate=config.sample_rate, voices=Voices.single(),
                         fields={"seed", "max_new_tokens", "initial_codec_chunk_frames"})

    def stage_input(self, params: RequestParams) -> CosyVoice3Input:
        request = self.prologue(params)
        sampling, ras_params = STANDARD.sampling(request.extra, self.config.lm.sampling, request.seed)
        return clone_input(request, sampling, ras_params, request.initial_codec_chunk_frames)
