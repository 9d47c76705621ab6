"""What a family requires of the voice it clones (`ref_audio` + `ref_text`, or a stored voice), declared once per
family and checked here the same way for all of them, with the same fields, reasons and messages.

A family's adapter declares a `ReferencePolicy` and calls `check` first in `stage_input`; what is particular to the
family (clone modes, precomputed latents, a speaker embedding instead of a clip) stays in the adapter. Errors name the
field to fix: `voice` when the reference is a stored voice (its record lacks what is missing), else `ref_audio` or
`ref_text`.
"""

from __future__ import annotations

from dataclasses import dataclass

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams


@dataclass(frozen=True)
class ReferencePolicy:
    model: str
    """The family's name as messages give it."""
    required: bool = False
    """Every request clones: no reference is an error (CosyVoice3, GLM-TTS)."""
    transcript: bool = True
    """A clone needs the clip's transcript (ref_text, or the stored voice's)."""
    audio: bool = True
    """A clone needs the clip's samples (False: the family takes precomputed artifacts instead, and checks them)."""
    max_seconds: float | None = None
    """Longer clips are refused (REFERENCE_TOO_LONG)."""
    recommended_seconds: tuple[float, float] | None = None
    """Clips outside this range are served with a warning (REFERENCE_LENGTH)."""

    def check(self, params: RequestParams) -> ReferenceAudio | None:
        """The reference `params` clones from, None when it does not clone; raises InvalidField, and appends the
        warnings to `params.warnings`. A `ref_text` without a reference is refused for every family: it is the
        transcript of a clip that is not there."""
        reference = params.reference
        if reference is None:
            if self.required:
                raise InvalidField("ref_audio", "REF_AUDIO_REQUIRED", f"{self.model} requires 'ref_audio' (reference audio for voice cloning)")
            if str(params.fields.get("ref_text") or "").strip():
                raise InvalidField("ref_text", "REF_AUDIO_REQUIRED", "ref_text is the transcript of ref_audio: give ref_audio (or a cloned voice) too")
            return None
        stored = bool(reference.name)
        if self.transcript and not (reference.text or "").strip():
            raise InvalidField("voice" if stored else "ref_text", "REF_TEXT_REQUIRED",
                               f"{self.model} requires 'ref_text' (transcript of the reference audio): set it, or store the voice with one")
        field = "voice" if stored else "ref_audio"
        if not self.audio:
            return reference
        if reference.samples is None or len(reference.samples) == 0:
            raise InvalidField(field, "VOICE_NOT_SUPPORTED", f"the voice has no audio for {self.model} to clone")
        seconds = len(reference.samples) / reference.sample_rate
        best = self.recommended_seconds
        if self.max_seconds is not None and seconds > self.max_seconds:
            hint = f" ({best[0]:.0f} to {best[1]:.0f} s clone best)" if best else ""
            raise InvalidField(field, "REFERENCE_TOO_LONG", f"the reference clip is {seconds:.1f} s; {self.model} takes at most "
                               f"{self.max_seconds:.0f} s{hint}")
        if best is not None and not best[0] <= seconds <= best[1]:
            params.warnings.append((field, "REFERENCE_LENGTH", f"the reference clip is {seconds:.1f} s; {self.model} clones best "
                                    f"from {best[0]:.0f} to {best[1]:.0f} s"))
        return reference
