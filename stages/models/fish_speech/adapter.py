"""Which request fields S2 Pro honours, and how a request becomes its stage-0 input.

The model has no preset speakers: `voice` is "default" (the text-only prompt) or an uploaded voice; `ref_audio`
clones a clip and then needs `ref_text`, its transcript (the clone prompt carries both). Sampling defaults are
the peer's deploy defaults (temperature 0.8, top_k 30, top_p 0.9, max 2048 frames): the checkpoint has no
generation config.
"""

from __future__ import annotations

import numpy as np

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParams
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import SamplingTable, StandardAdapter, Voices, sampling_params
from vocalis.stages.models.fish_speech.prompt import ControlTokenInText, normalize_text
from vocalis.stages.models.fish_speech.runtime import FishSpeechInput
from vocalis.stages.runtime.request import RequestParams

DEFAULTS = {"temperature": 0.8, "top_k": 30, "top_p": 0.9, "repetition_penalty": 1.0, "max_new_tokens": 2048}
SAMPLING = SamplingTable.same_names("temperature", "top_k", "top_p", "repetition_penalty")


class FishSpeechAdapter(StandardAdapter[FishSpeechInput]):
    MODEL = "Fish Speech S2 Pro"
    EXTRA_PARAMS = ExtraParams(MODEL, sampling_params(DEFAULTS, {"temperature": "the semantic tokens and the fast AR's codes",
                                                                 "repetition_penalty": "on the semantic tokens"}))
    REFERENCE = ReferencePolicy("Fish Speech")
    """Cloning is optional; a clone needs its transcript and audio."""

    def __init__(self, sample_rate: int) -> None:
        super().__init__(sample_rate=sample_rate, voices=Voices.single(), fields={"seed", "max_new_tokens"})

    def stage_input(self, params: RequestParams) -> FishSpeechInput:
        request = self.prologue(params)
        sampling = SAMPLING.params(request.extra, DEFAULTS, seed=request.seed, max_new_tokens=request.max_new_tokens)
        reference = request.reference
        if reference is None:
            return FishSpeechInput(sampling)
        text = (reference.text or "").strip()
        try:
            normalize_text(text, default_speaker=True)
        except ControlTokenInText as error:
            raise InvalidField("ref_text", "INVALID_VALUE", str(error)) from None
        samples = np.asarray(reference.samples, dtype=np.float32)
        return FishSpeechInput(sampling, samples, int(reference.sample_rate), text)
