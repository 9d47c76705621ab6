"""Which request fields AuK honours, and how they become its stage-0 input.

One instruction (plus an optional source clip) selects the task: TTS, instruct TTS, editing, conversion,
enhancement, separation. `instructions` carries the whole cookbook instruction; `input` alone is taken as the
instruction (warned); both: `instructions` wins (warned). `task_type` CustomVoice/Base wrap the input as
`Say the following: "<input>"` / `Say the following with the same voice: "<input>"`; beside `instructions` the
instruction decides and `task_type` is ignored with a warning (the server's field policy,
`Capabilities.instructions_decide_task`). `duration_seconds` is the
output length (required without `ref_audio`; with it, the clip's length). `ref_audio` is the clip to edit or the
voice to follow; `ref_text` is not used (the field policy warns). The whole input is one unit of synthesis
(Capabilities.whole_input): the text is an instruction, not sentences to split.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.models.auk.config import MAX_SECONDS, AuKConfig
from vocalis.stages.models.auk.schedule import Schedule, resolve, valid_t_grid
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

MAX_INSTRUCTION_CHARS = 4096
VAE_SAMPLE_SEED_OFFSET = 0x5EED0A0C
"""The reference-latent draw's generator is seeded apart from the diffusion noise's (vLLM-Omni's offset)."""
TASK_PREFIXES = {"custom_voice": "Say the following: ", "base": "Say the following with the same voice: "}



@dataclass(frozen=True)
class AuKInput:
    """Stage 0's input: the request as AuK needs it (the instruction may still need the unit's text)."""

    instruction: str | None
    """The whole instruction, when `instructions` gave it; None: the unit's text is the instruction."""
    task_prefix: str | None
    """`task_type`'s wrapper for the unit's text (None: none)."""
    duration_seconds: float | None
    reference: ReferenceAudio | None
    schedule: Schedule
    seed: int | None
    vae_sample: bool = False

    def instruction_for(self, text: str) -> str:
        if self.instruction is not None:
            return self.instruction
        if self.task_prefix is not None and not any(text.startswith(p) for p in TASK_PREFIXES.values()):
            return self.task_prefix + json.dumps(text, ensure_ascii=False)
        return text

WARMUP_SECONDS = 1.0
"""The warm-up utterance's length (without ref_audio AuK must be told one)."""


class AuKAdapter(StandardAdapter[AuKInput]):
    MODEL = "AuK"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("num_inference_steps", int, "flow steps (default 32; AuK-Flash: 4, fixed)", minimum=1, maximum=256),
        ExtraParam("guidance_scale", float, "classifier-free guidance (default 2.0; 0: off; AuK-Flash: 0, fixed)", minimum=0, maximum=20),
        ExtraParam("sway", float, "sway sampling coefficient of the time grid (default -1.0)", minimum=-1, maximum=1),
        ExtraParam("t_grid", list, "explicit time grid: at least 2 finite, strictly increasing numbers (overrides sway)"),
        ExtraParam("vae_sample", bool, "draw the source clip's latent from the VAE posterior instead of taking its mean"),
    ])

    def __init__(self, config: AuKConfig) -> None:
        self.config = config
        # No voice of its own (the instruction, or the clip, gives it); ref_audio is a clip to edit or follow, checked
        # here, so no ReferencePolicy (there is no transcript to ask for).
        super().__init__(sample_rate=config.sample_rate, voices=Voices.none(), voice_cloning=True, whole_input=True,
                         fields={"instructions", "task_type", "duration_seconds", "ref_audio", "seed"},
                         instructions_decide_task=True, instructions_carry_text=True, warmup_fields=(("duration_seconds", WARMUP_SECONDS),))

    def stage_input(self, params: RequestParams) -> AuKInput:
        fields = params.fields
        notes: list[tuple[str, str]] = []
        instruction = None
        if str(fields.get("instructions") or "").strip():
            instruction = str(fields["instructions"])
            if len(instruction) > MAX_INSTRUCTION_CHARS:
                raise InvalidField("instructions", "TOO_LONG", f"instructions must be at most {MAX_INSTRUCTION_CHARS} characters")
            notes.append(("input", "instructions carries the whole AuK instruction: the input text is not used"))
        task = fields.get("task_type")
        prefix = None
        if task not in (None, "unspecified"):
            if task not in TASK_PREFIXES:
                raise InvalidField("task_type", "INVALID_VALUE", f"AuK takes task_type CustomVoice or Base, not {task}")
            if instruction is None:
                prefix = TASK_PREFIXES[task]
        elif instruction is None:
            notes.append(("instructions", "no instructions: the input text is taken as the whole AuK instruction"))
        duration = fields.get("duration_seconds")
        if duration is not None:
            duration = float(duration)
            if not math.isfinite(duration) or duration <= 0 or duration > MAX_SECONDS:
                raise InvalidField("duration_seconds", "OUT_OF_RANGE", f"duration_seconds must be above 0 and at most {MAX_SECONDS:g}; got {duration}")
        elif params.reference is None:
            raise InvalidField("duration_seconds", "FIELD_REQUIRED",
                               "duration_seconds is required without ref_audio: AuK is told how long the audio is")
        elif len(params.reference.samples) > MAX_SECONDS * params.reference.sample_rate:
            raise InvalidField("ref_audio", "TOO_LONG", f"ref_audio is longer than {MAX_SECONDS:g} s, the most AuK generates: "
                               "give a shorter clip or a duration_seconds")
        if params.reference is not None and len(params.reference.samples) == 0:
            raise InvalidField("ref_audio", "INVALID_VALUE", "AuK needs the clip's audio: ref_audio is empty")
        settings = self.prologue(params).extra
        t_grid = settings.get("t_grid")
        if t_grid is not None and (why := valid_t_grid(t_grid)) is not None:
            raise InvalidField("extra_params.t_grid", "INVALID_VALUE", f"extra_params.t_grid {why}")
        schedule, flash_notes = resolve(self.config, settings.get("num_inference_steps"), settings.get("guidance_scale"),
                                        settings.get("sway"), settings.get("t_grid"))
        params.warnings.extend((name, "MODEL_NOTE", note) for name, note in notes + [("extra_params", note) for note in flash_notes])
        seed = fields.get("seed")
        return AuKInput(
            instruction=instruction, task_prefix=prefix, duration_seconds=duration, reference=params.reference,
            schedule=schedule, seed=None if seed is None else int(seed), vae_sample=bool(settings.get("vae_sample", False)),
        )
