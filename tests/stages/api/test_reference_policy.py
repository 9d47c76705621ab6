"""The reference policy the cloning families declare (stages/api/reference_policy.py): one check, the same fields, reasons
and messages for every family (CosyVoice3, Fish Speech, higgs-audio v2, OmniVoice, VoxCPM2)."""

from __future__ import annotations

import numpy as np
import pytest

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

POLICY = ReferencePolicy("Model", max_seconds=30, recommended_seconds=(3, 10))


def params(reference: ReferenceAudio | None = None, **fields) -> RequestParams:
    return RequestParams(model="m", voice="", fields=fields, reference=reference)


def clip(seconds: float, text: str | None = "words", name: str | None = None) -> ReferenceAudio:
    return ReferenceAudio(np.zeros(int(seconds * 16000), np.float32), 16000, text, name)


def refused(policy: ReferencePolicy, request: RequestParams) -> InvalidField:
    with pytest.raises(InvalidField) as caught:
        policy.check(request)
    return caught.value


def test_no_reference_is_no_clone_unless_required():
    assert POLICY.check(params()) is None
    error = refused(ReferencePolicy("CosyVoice3", required=True), params())
    assert (error.field, error.reason) == ("ref_audio", "REF_AUDIO_REQUIRED")
    assert "CosyVoice3 requires 'ref_audio'" in str(error)


def test_ref_text_without_a_clip_is_refused_by_every_policy():
    for policy in (POLICY, ReferencePolicy("VoxCPM2", transcript=False, audio=False)):
        error = refused(policy, params(ref_text="the transcript"))
        assert (error.field, error.reason) == ("ref_text", "REF_AUDIO_REQUIRED") and "give ref_audio" in str(error)
    assert POLICY.check(params(ref_text="  ")) is None  # an empty transcript of nothing is harmless


def test_a_missing_transcript_names_the_field_to_fix():
    inline = refused(POLICY, params(clip(5, text=None)))
    assert (inline.field, inline.reason) == ("ref_text", "REF_TEXT_REQUIRED") and "Model requires 'ref_text'" in str(inline)
    stored = refused(POLICY, params(clip(5, text=" ", name="alice")))
    assert (stored.field, stored.reason) == ("voice", "REF_TEXT_REQUIRED")
    assert ReferencePolicy("VoxCPM2", transcript=False).check(params(clip(5, text=None))) is not None


def test_audio_and_its_length():
    empty = refused(POLICY, params(clip(0, name="alice")))
    assert (empty.field, empty.reason) == ("voice", "VOICE_NOT_SUPPORTED")
    assert ReferencePolicy("OmniVoice", audio=False).check(params(clip(0))) is not None  # artifacts may stand in
    too_long = refused(POLICY, params(clip(31)))
    assert (too_long.field, too_long.reason) == ("ref_audio", "REFERENCE_TOO_LONG") and "31.0 s" in str(too_long)
    short = params(clip(1))
    assert POLICY.check(short) is short.reference
    assert short.warnings == [("ref_audio", "REFERENCE_LENGTH", "the reference clip is 1.0 s; Model clones best from 3 to 10 s")]
    good = params(clip(5))
    assert POLICY.check(good) is good.reference and good.warnings == []
