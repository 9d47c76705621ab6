"""Which request fields S2 Pro honours, and how a request becomes its stage-0 input.

The model has no preset speakers: `voice` is "default" (the text-only prompt) or an uploaded voice; `ref_audio`
clones a clip and then needs `ref_text`, its transcript (the clone prompt carries both). Sampling defaults are
the peer's deploy defaults (temperature 0.8, top_k 30, top_p 0.9, max 2048 frames).
"""

from __future__ import annotations

import numpy as np

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.models.fish_speech.prompt import ControlTokenInText, normalize_text
from vocalis.stages.models.fish_speech.runtime import FishSpeechInput
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "default"
DEFAULTS = {"temperature": 0.8, "top_k": 30, "top_p": 0.9, "repetition_penalty": 1.0, "max_new_tokens": 2048}

EXTRA_PARAMS = ExtraParams("Fish Speech S2 Pro", [
    ExtraParam("temperature", float, "Sampling temperature of the semantic tokens and the fast AR's codes; 0 is greedy "
               "(default 0.8).", minimum=0),
    ExtraParam("top_k", int, "Top-k (default 30; 0 keeps all).", minimum=0),
    ExtraParam("top_p", float, "Nucleus sampling, in (0, 1] (default 0.9).", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("repetition_penalty", float, "Penalty on semantic tokens already generated (default 1, none).",
               minimum=0, exclusive_minimum=True),
])

REFERENCE = ReferencePolicy("Fish Speech")
"""Cloning is optional; a clone needs its transcript and audio."""


class FishSpeechAdapter:
    def __init__(self, sample_rate: int, positions: int | None = None) -> None:
        self.positions = positions
        """The slow AR's KV cache length, which ends generation before a larger max_new_tokens does."""
        self.capabilities = Capabilities(
            sample_rate=sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"seed", "max_new_tokens", "extra_params", "ref_audio", "ref_text"}),
            extra_params=tuple(EXTRA_PARAMS),
            streaming=True,
            voice_cloning=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.strip().lower() in ("", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> FishSpeechInput:
        fields = params.fields
        extra = EXTRA_PARAMS.parse(fields.get("extra_params"))
        max_new = checked_max_new_tokens(params, self.positions) if "max_new_tokens" in fields else DEFAULTS["max_new_tokens"]
        sampling = SamplingParams(
            temperature=extra.get("temperature", DEFAULTS["temperature"]), top_k=extra.get("top_k", DEFAULTS["top_k"]),
            top_p=extra.get("top_p", DEFAULTS["top_p"]),
            repetition_penalty=extra.get("repetition_penalty", DEFAULTS["repetition_penalty"]),
            seed=fields.get("seed"), max_new_tokens=max_new)
        reference = REFERENCE.check(params)
        if reference is None:
            return FishSpeechInput(sampling)
        text = (reference.text or "").strip()
        try:
            normalize_text(text, default_speaker=True)
        except ControlTokenInText as error:
            raise InvalidField("ref_text", "INVALID_VALUE", str(error)) from None
        samples = np.asarray(reference.samples, dtype=np.float32)
        return FishSpeechInput(sampling, samples, int(reference.sample_rate), text)
