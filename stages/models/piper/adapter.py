"""Which request fields a Piper voice honours, and how they become Piper's scales."""

from __future__ import annotations

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.model import Capabilities
from vocalis.stages.models.piper.runtime import PiperInput
from vocalis.stages.models.piper.voice import LoadedPiperVoice
from vocalis.stages.runtime.request import RequestParams

EXTRA_PARAMS = ExtraParams("Piper", [
    ExtraParam("noise_scale", float, "Generator noise, 0 to 2 (0 with noise_w_scale 0: deterministic audio). Default from the voice.",
               minimum=0, maximum=2),
    ExtraParam("noise_w_scale", float, "Phoneme-duration noise, 0 to 2. Default from the voice.", minimum=0, maximum=2),
])


class PiperAdapter:
    """Validates a request against one Piper voice and builds its PiperInput."""

    def __init__(self, voice: LoadedPiperVoice) -> None:
        self.voice = voice
        self.capabilities = Capabilities(
            sample_rate=voice.sample_rate,
            voices=(voice.name,),
            default_voice=voice.name,
            accepted_fields=frozenset(
                {"speed", "language", "extra_params"}
                | ({"seed"} if voice.seeded else set())
                | ({"word_timestamps"} if voice.durations_output else set())
            ),
            extra_params=tuple(EXTRA_PARAMS),
            streaming=True,
            languages=(voice.language,),
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", "default", self.voice.name.lower()):
            return self.voice.name
        raise UnknownVoice(voice, [self.voice.name])

    def stage_input(self, params: RequestParams) -> PiperInput:
        fields = params.fields
        if "language" in fields:
            self._check_language(fields["language"])
        extra = EXTRA_PARAMS.parse(fields.get("extra_params"))
        config = self.voice.config
        speed = float(fields.get("speed", 1.0))
        return PiperInput(
            length_scale=config.length_scale / speed,
            noise_scale=extra.get("noise_scale", config.noise_scale),
            noise_w_scale=extra.get("noise_w_scale", config.noise_w_scale),
            seed=fields.get("seed"),
            word_timestamps=bool(fields.get("word_timestamps", False)),
        )

    def _check_language(self, language: str) -> None:
        code = self.voice.language.lower().replace("-", "_")
        family = code.split("_")[0]
        wanted = language.strip().lower().replace("-", "_")
        if wanted not in {code, family, "english" if family == "en" else code}:
            raise InvalidField(
                "language",
                "UNSUPPORTED_LANGUAGE",
                f"language {language!r} is not spoken by voice {self.voice.name}; it speaks {self.voice.language}",
            )
