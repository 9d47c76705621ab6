"""Which request fields OmniVoice honours, and how they become its stage-0 input.

Three modes from one checkpoint: auto voice (nothing asked: the model picks a voice from the
text), voice design (`instructions`: attributes such as "female, low pitch, british accent"),
and cloning (`ref_audio` with `ref_text`, or a stored voice). `language` is a code or a name
from the model's language list. Decoding settings come in `extra_params`. Anything the model
cannot honour is refused by field name, never ignored.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.models.omnivoice.config import GenerationConfig
from vocalis.stages.models.omnivoice.runtime import OmniVoiceInput
from vocalis.stages.models.omnivoice.text import InvalidInstruction, language_code, language_table, normalize_instruction
from vocalis.stages.runtime.request import RequestParams

MAX_INSTRUCTION_CHARS = 500

_GENERATION_FIELDS = {f.name for f in fields(GenerationConfig)}


class OmniVoiceAdapter(StandardAdapter[OmniVoiceInput]):
    MODEL = "OmniVoice"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("num_step", int, "unmasking steps per unit, 1 to 256 (default 32)", minimum=1, maximum=256),
        ExtraParam("num_inference_steps", int, "alias of num_step", minimum=1, maximum=256, target="num_step"),
        ExtraParam("guidance_scale", float, "classifier-free guidance, 0 to 20 (default 2; 0: off)", minimum=0, maximum=20),
        ExtraParam("t_shift", float, "time shift of the unmasking schedule, above 0 (default 0.1)", minimum=0, maximum=10, exclusive_minimum=True),
        ExtraParam("layer_penalty_factor", float, "confidence penalty per codebook (default 5)", minimum=0, maximum=100),
        ExtraParam("position_temperature", float, "randomness of which positions are committed first, 0 to 100 (default 5; 0: deterministic)",
                   minimum=0, maximum=100),
        ExtraParam("class_temperature", float, "randomness of the tokens chosen (default 0: greedy)", minimum=0, maximum=100),
        ExtraParam("denoise", bool, "ask for clean speech when cloning (default true)"),
        ExtraParam("audio_chunk_duration", float, "seconds of speech per unit of a long text (default 15; 0: never split)", minimum=0, maximum=120),
        ExtraParam("audio_chunk_threshold", float, "a text longer than this many seconds is split (default 30)", minimum=0, maximum=600),
        ExtraParam("preprocess_prompt", bool, "trim the reference clip's silences (default true)", target="preprocess_reference"),
        ExtraParam("postprocess_output", bool, "trim long pauses and edge silences of the audio (default true)"),
    ])
    REFERENCE = ReferencePolicy(MODEL, audio=False)
    """Cloning needs the clip's transcript (the clip is checked when encoded)."""

    def __init__(self, sample_rate: int, generation: GenerationConfig | None = None) -> None:
        self.generation = generation or GenerationConfig()
        # One voice, "default" (or "auto"): the model picks a voice from the text.
        super().__init__(sample_rate=sample_rate, voices=Voices.single(aliases=("auto",)), fields={"language", "instructions", "seed", "speed"},
                         languages=tuple(sorted({code for _, code in language_table()})))

    def stage_input(self, params: RequestParams) -> OmniVoiceInput:
        request = self.prologue(params)
        generation, settings = self._extra(request.extra)
        language = None
        if request.language is not None:
            try:
                language = language_code(request.language)
            except KeyError:
                raise self.unsupported_language(request.language, f"give one of its {len(self.capabilities.languages)} languages as an "
                                                "ISO 639 code such as 'en' or a name such as 'English' ('auto' to let the model tell)") from None
        instruction = None
        if str(request.fields.get("instructions") or "").strip():
            instruction = str(request.fields["instructions"])
            if len(instruction) > MAX_INSTRUCTION_CHARS:
                raise InvalidField("instructions", "TOO_LONG", f"instructions must be at most {MAX_INSTRUCTION_CHARS} characters")
            try:
                normalize_instruction(instruction, "")
            except InvalidInstruction as error:
                raise InvalidField("instructions", "INVALID_VALUE", f"instructions: {error}") from None
        return OmniVoiceInput(
            generation=generation,
            language=language,
            instruction=instruction,
            reference=request.reference,
            speed=request.speed,
            seed=request.seed,
            level_whole=not params.streamed,
            **settings,
        )

    def _extra(self, extra: dict[str, Any]) -> tuple[GenerationConfig, dict[str, Any]]:
        """Parsed extra params split into decoding overrides and the other settings."""
        overrides: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        for name, value in extra.items():
            (overrides if name in _GENERATION_FIELDS else settings)[name] = value
        return self.generation.with_overrides(overrides), settings
