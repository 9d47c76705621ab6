"""The peer's request rules for Voxtral (§5.9): voice or ref_audio required, presets lower-cased, max_new_tokens and
cfg_alpha ranges, seed."""

from __future__ import annotations

import re

import pytest

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.models.voxtral.adapter import DEFAULT_CFG_ALPHA, VOICE_REQUIRED, VoxtralAdapter
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

VOICES = ("casual_male", "neutral_female")


@pytest.fixture
def adapter() -> VoxtralAdapter:
    return VoxtralAdapter(VOICES, 24000, encoder_weights=False)


def test_presets_resolve_case_insensitively_and_unknown_ones_are_named(adapter):
    assert adapter.resolve_voice("Neutral_Female") == "neutral_female"
    assert adapter.resolve_voice("") == ""
    with pytest.raises(UnknownVoice, match="casual_male, neutral_female"):
        adapter.resolve_voice("Neutral_Male")
    assert adapter.capabilities.voices == VOICES and adapter.capabilities.sample_rate == 24000


def test_a_voice_is_required(adapter):
    with pytest.raises(InvalidField, match=re.escape(VOICE_REQUIRED)) as error:
        adapter.stage_input(RequestParams(model="m", voice=""))
    assert error.value.field == "voice"


def test_fields_become_the_stage_input(adapter):
    default = adapter.stage_input(RequestParams(model="m", voice="casual_male"))
    assert (default.voice, default.cfg_alpha, default.seed, default.max_new_tokens) == ("casual_male", DEFAULT_CFG_ALPHA, None, None)
    fields = {"seed": 4, "max_new_tokens": 30, "extra_params": {"cfg_alpha": 2.5}}
    chosen = adapter.stage_input(RequestParams(model="m", voice="casual_male", fields=fields))
    assert (chosen.seed, chosen.max_new_tokens, chosen.cfg_alpha) == (4, 30, 2.5)


@pytest.mark.parametrize(("fields", "field"), [({"max_new_tokens": 0}, "max_new_tokens"), ({"max_new_tokens": 5000}, "max_new_tokens"),
                                               ({"extra_params": {"cfg_alpha": -1}}, "extra_params.cfg_alpha")])
def test_out_of_range_values_name_their_field(adapter, fields, field):
    with pytest.raises(InvalidField) as error:
        adapter.stage_input(RequestParams(model="m", voice="casual_male", fields=fields))
    assert error.value.field == field


def test_a_stored_voice_is_refused_by_its_field(adapter):
    """An uploaded voice would clone from its audio: the open checkpoint cannot, and the error names `voice`."""
    stored = ReferenceAudio(samples=[0.0] * 2400, sample_rate=24000, name="alice")
    with pytest.raises(InvalidField, match="encoder weights") as error:
        adapter.stage_input(RequestParams(model="m", voice="", reference=stored))
    assert error.value.field == "voice"
