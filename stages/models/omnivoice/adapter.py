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

from vocalis.stages.errors import InvalidField, UnknownVoice
from vocalis.stages.model import Capabilities
from vocalis.stages.models.omnivoice.config import GenerationConfig
from vocalis.stages.models.omnivoice.stage import OmniVoiceInput
from vocalis.stages.models.omnivoice.text import InvalidInstruction, language_code, language_table, normalize_instruction
from vocalis.stages.request import RequestParams

VOICE = "default"
"""The one preset: the auto voice."""
VOICE_ALIASES = ("", "default", "auto")
MAX_INSTRUCTION_CHARS = 500

# extra_params key -> (GenerationConfig field or input setting, type, check, description)
EXTRA_PARAMS: dict[str, tuple[str, type, Any, str]] = {
    "num_step": ("num_step", int, lambda v: 1 <= v <= 256, "unmasking steps per unit, 1 to 256 (default 32)"),
    "num_inference_steps": ("num_step", int, lambda v: 1 <= v <= 256, "alias of num_step"),
    "guidance_scale": ("guidance_scale", float, lambda v: 0 <= v <= 20, "classifier-free guidance, 0 to 20 (default 2; 0: off)"),
    "t_shift": ("t_shift", float, lambda v: 0 < v <= 10, "time shift of the unmasking schedule, above 0 (default 0.1)"),
    "layer_penalty_factor": ("layer_penalty_factor", float, lambda v: 0 <= v <= 100, "confidence penalty per codebook (default 5)"),
    "position_temperature": (
        "position_temperature", float, lambda v: 0 <= v <= 100,
        "randomness of which positions are committed first, 0 to 100 (default 5; 0: deterministic)",
    ),
    "class_temperature": ("class_temperature", float, lambda v: 0 <= v <= 100, "randomness of the tokens chosen (default 0: greedy)"),
    "denoise": ("denoise", bool, lambda v: True, "ask for clean speech when cloning (default true)"),
    "audio_chunk_duration": (
        "audio_chunk_duration", float, lambda v: 0 <= v <= 120, "seconds of speech per unit of a long text (default 15; 0: never split)",
    ),
    "audio_chunk_threshold": (
        "audio_chunk_threshold", float, lambda v: 0 <= v <= 600, "a text longer than this many seconds is split (default 30)",
    ),
    "preprocess_prompt": ("preprocess_reference", bool, lambda v: True, "trim the reference clip's silences (default true)"),
    "postprocess_output": ("postprocess_output", bool, lambda v: True, "trim long pauses and edge silences of the audio (default true)"),
}
_GENERATION_FIELDS = {f.name for f in fields(GenerationConfig)}


class OmniVoiceAdapter:
    def __init__(self, sample_rate: int, generation: GenerationConfig | None = None) -> None:
        self.generation = generation or GenerationConfig()
        self.capabilities = Capabilities(
            sample_rate=sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"language", "instructions", "ref_audio", "ref_text", "seed", "speed", "extra_params"}),
            extra_params={key: description for key, (_, _, _, description) in EXTRA_PARAMS.items()},
            streaming=True,
            voice_cloning=True,
            languages=tuple(sorted({code for _, code in language_table()})),
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.strip().lower() in VOICE_ALIASES:
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> OmniVoiceInput:
        fields_ = params.fields
        generation, settings = self._extra(fields_.get("extra_params") or {})
        language = None
        if "language" in fields_:
            try:
                language = language_code(str(fields_["language"]))
            except KeyError:
                raise InvalidField(
                    "language", "UNSUPPORTED_LANGUAGE",
                    f"language {fields_['language']!r} is not one of this model's {len(self.capabilities.languages)} languages "
                    "(give an ISO 639 code such as 'en', or a name such as 'English'; 'auto' to let the model tell)",
                ) from None
        instruction = None
        if "instructions" in fields_ and str(fields_["instructions"]).strip():
            instruction = str(fields_["instructions"])
            if len(instruction) > MAX_INSTRUCTION_CHARS:
                raise InvalidField("instructions", "TOO_LONG", f"instructions must be at most {MAX_INSTRUCTION_CHARS} characters")
            try:
                normalize_instruction(instruction, "")
            except InvalidInstruction as error:
                raise InvalidField("instructions", "INVALID_VALUE", f"instructions: {error}") from None
        reference = params.reference
        if reference is None and "ref_text" in fields_:
            raise InvalidField("ref_text", "REF_AUDIO_REQUIRED", "ref_text is the transcript of ref_audio: give ref_audio (or a cloned voice) too")
        if reference is not None and not (reference.text or "").strip():
            raise InvalidField(
                "ref_text", "REF_TEXT_REQUIRED",
                "cloning with OmniVoice needs the transcript of the reference clip: set ref_text (or store the voice with one)",
            )
        return OmniVoiceInput(
            generation=generation,
            language=language,
            instruction=instruction,
            reference=reference,
            speed=float(fields_.get("speed", 1.0)),
            seed=fields_.get("seed"),
            level_whole=not params.streamed,
            **settings,
        )

    def _extra(self, extra: dict[str, Any]) -> tuple[GenerationConfig, dict[str, Any]]:
        unknown = sorted(set(extra) - set(EXTRA_PARAMS))
        if unknown:
            raise InvalidField(
                "extra_params", "FIELD_NOT_SUPPORTED",
                f"extra_params {', '.join(unknown)} not supported by OmniVoice; it accepts: {', '.join(EXTRA_PARAMS)}",
            )
        overrides: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        for key, value in extra.items():
            name, kind, check, _ = EXTRA_PARAMS[key]
            field = f"extra_params.{key}"
            if kind is bool:
                if not isinstance(value, bool):
                    raise InvalidField(field, "INVALID_VALUE", f"{field} must be true or false")
                typed: Any = value
            elif kind is int:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
                    raise InvalidField(field, "INVALID_VALUE", f"{field} must be an integer")
                typed = int(value)
            else:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise InvalidField(field, "INVALID_VALUE", f"{field} must be a number")
                typed = float(value)
            if not check(typed):
                raise InvalidField(field, "OUT_OF_RANGE", f"{field}: {EXTRA_PARAMS[key][3]}; got {value!r}")
            (overrides if name in _GENERATION_FIELDS else settings)[name] = typed
        return self.generation.with_overrides(overrides), settings
