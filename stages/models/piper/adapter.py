"""Which request fields a Piper voice honours, and how they become Piper's scales."""

from __future__ import annotations

from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.models.piper.runtime import PiperInput
from vocalis.stages.models.piper.voice import LoadedPiperVoice
from vocalis.stages.runtime.request import RequestParams


class PiperAdapter(StandardAdapter[PiperInput]):
    """Validates a request against one Piper voice and builds its PiperInput."""

    MODEL = "Piper"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("noise_scale", float, "Generator noise, 0 to 2 (0 with noise_w_scale 0: deterministic audio). Default from the voice.",
                   minimum=0, maximum=2),
        ExtraParam("noise_w_scale", float, "Phoneme-duration noise, 0 to 2. Default from the voice.", minimum=0, maximum=2),
    ])

    def __init__(self, voice: LoadedPiperVoice) -> None:
        self.voice = voice
        super().__init__(
            sample_rate=voice.sample_rate, voices=Voices.single(voice.name),
            fields={"speed", "language"} | ({"seed"} if voice.seeded else set()) | ({"word_timestamps"} if voice.durations_output else set()),
            languages=(voice.language,),
        )

    def stage_input(self, params: RequestParams) -> PiperInput:
        request = self.prologue(params)
        if request.language is not None:
            self._check_language(request.language)
        config = self.voice.config
        return PiperInput(
            length_scale=config.length_scale / request.speed,
            noise_scale=request.extra.get("noise_scale", config.noise_scale),
            noise_w_scale=request.extra.get("noise_w_scale", config.noise_w_scale),
            seed=request.seed,
            word_timestamps=bool(params.fields.get("word_timestamps", False)),
        )

    def _check_language(self, language: str) -> None:
        code = self.voice.language.lower().replace("-", "_")
        family = code.split("_")[0]
        wanted = language.strip().lower().replace("-", "_")
        if wanted not in {code, family, "english" if family == "en" else code}:
            raise self.unsupported_language(language, f"voice {self.voice.name} speaks {self.voice.language}")
