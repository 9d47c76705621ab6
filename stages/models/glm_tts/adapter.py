"""Which request fields GLM-TTS honours, and how a request becomes its stage-0 input.

Every request clones: `ref_audio` + `ref_text`, or a stored voice with its transcript (400 otherwise: the shared
`ReferencePolicy` checks it as for the other cloning families). Sampling is RAS by default (top_p 0.8, top_k 25,
window 10, as published); `extra_params.sampler = "topk"` switches to the published alternative, plain top-k sampling
(top_k 25)."""

from __future__ import annotations

from typing import Any

import numpy as np

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.models.cosyvoice_common.ras_sampling import RASParams
from vocalis.stages.models.glm_tts.frontend import MAX_REFERENCE_SECONDS, RECOMMENDED_SECONDS
from vocalis.stages.models.glm_tts.runtime import GLMTTSInput
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "default"
MAX_NEW_TOKENS = 4096
"""The peer's bound on max_new_tokens, which caps the text-length budget (clients send 4096 to leave it alone)."""
TOP_K = 25
EXTRA_PARAMS = ExtraParams("GLM-TTS", [
    ExtraParam("sampler", str, "ras (default: repetition-aware nucleus sampling, as published) or topk (the published "
               "alternative: top-k sampling).", choices=("ras", "topk")),
    ExtraParam("temperature", float, "Sampling temperature; 0 is greedy. Default 1.", minimum=0),
    ExtraParam("top_k", int, "Tokens kept at most. Default 25.", minimum=1),
    ExtraParam("top_p", float, "RAS only: nucleus probability, in (0, 1]. Default 0.8.", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("win_size", int, "RAS only: tokens looked back for repetition. Default 10.", minimum=1),
    ExtraParam("tau_r", float, "RAS only: share of the window that makes a pick a repetition. Default 0.1.", minimum=0, maximum=1),
])
REFERENCE = ReferencePolicy("GLM-TTS", required=True, max_seconds=MAX_REFERENCE_SECONDS, recommended_seconds=RECOMMENDED_SECONDS)
"""The speech tokenizer takes at most 30 s; 3 to 10 s clone best."""


class GLMTTSAdapter:
    def __init__(self, sample_rate: int, max_new_tokens: int = MAX_NEW_TOKENS) -> None:
        self.max_new_tokens = max_new_tokens
        self.capabilities = Capabilities(
            sample_rate=sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"ref_audio", "ref_text", "seed", "max_new_tokens", "extra_params"}),
            extra_params=tuple(EXTRA_PARAMS),
            streaming=True,
            voice_cloning=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> GLMTTSInput:
        fields = params.fields
        reference = REFERENCE.check(params)
        assert reference is not None  # required
        text = (reference.text or "").strip()
        extra = EXTRA_PARAMS.parse(fields.get("extra_params"))
        topk = extra.pop("sampler", "ras") == "topk"
        settings: dict[str, Any] = {}
        if "max_new_tokens" in fields:
            settings["max_new_tokens"] = checked_max_new_tokens(params, upper=self.max_new_tokens)
        seed = int(fields["seed"]) if "seed" in fields else None
        temperature = extra.get("temperature", 1.0)
        if topk:
            for key in ("top_p", "win_size", "tau_r"):
                if key in extra:
                    raise InvalidField(f"extra_params.{key}", "FIELD_NOT_SUPPORTED", f"{key} applies to the ras sampler only")
            sampling, ras = SamplingParams(temperature=temperature, top_k=extra.get("top_k", TOP_K), seed=seed), None
        else:
            ras = RASParams(top_p=extra.get("top_p", 0.8), top_k=extra.get("top_k", TOP_K), win_size=extra.get("win_size", 10),
                            tau_r=extra.get("tau_r", 0.1))
            sampling = SamplingParams(temperature=temperature, seed=seed)
        return GLMTTSInput(ref_text=text, samples=np.asarray(reference.samples, dtype=np.float32).reshape(-1),
                           sample_rate=int(reference.sample_rate), sampling=sampling, ras=ras, **settings)
