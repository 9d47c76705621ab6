"""Which request fields GLM-TTS honours, and how a request becomes its stage-0 input.

Every request clones: `ref_audio` + `ref_text`, or a stored voice with its transcript (400 otherwise: the shared
`ReferencePolicy` checks it as for the other cloning families). Sampling is RAS by default (top_p 0.8, top_k 25,
window 10, as published); `extra_params.sampler = "topk"` switches to the published alternative, plain top-k sampling
(top_k 25). `max_new_tokens` (1 to 4096) caps the text-length budget (clients send 4096 to leave it alone)."""

from __future__ import annotations

from vocalis.stages.api.extra_params import ExtraParams
from vocalis.stages.api.max_new_tokens import PEER_MAX_NEW_TOKENS
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.models.cosyvoice_common.ras_params import RASParams
from vocalis.stages.models.cosyvoice_common.sampler_choice import SamplerChoice
from vocalis.stages.models.cosyvoice_common.voice_prompt import clone_input
from vocalis.stages.models.glm_tts.frontend import MAX_REFERENCE_SECONDS, RECOMMENDED_SECONDS
from vocalis.stages.models.glm_tts.runtime import GLMTTSInput
from vocalis.stages.runtime.request import RequestParams

TOP_K = SamplerChoice("topk", "the published alternative: top-k sampling", {"temperature": 1.0, "top_k": RASParams.top_k})


class GLMTTSAdapter(StandardAdapter[GLMTTSInput]):
    MODEL = "GLM-TTS"
    EXTRA_PARAMS = ExtraParams(MODEL, TOP_K.extra_params())
    REFERENCE = ReferencePolicy(MODEL, required=True, max_seconds=MAX_REFERENCE_SECONDS, recommended_seconds=RECOMMENDED_SECONDS)
    """The speech tokenizer takes at most 30 s; 3 to 10 s clone best."""

    def __init__(self, sample_rate: int, max_new_tokens: int = PEER_MAX_NEW_TOKENS) -> None:
        super().__init__(sample_rate=sample_rate, voices=Voices.single(), fields={"seed", "max_new_tokens"}, max_new_tokens=max_new_tokens)

    def stage_input(self, params: RequestParams) -> GLMTTSInput:
        request = self.prologue(params)
        sampling, ras = TOP_K.sampling(request.extra, RASParams(), request.seed)
        return clone_input(request, sampling, ras)
