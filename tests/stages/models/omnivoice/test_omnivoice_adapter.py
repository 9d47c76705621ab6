"""The OmniVoice adapter: what each request field becomes, and every refusal naming its field."""

from __future__ import annotations

import numpy as np
import pytest

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.models.omnivoice.adapter import OmniVoiceAdapter
from vocalis.stages.models.omnivoice.text import language_code, language_table
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

ADAPTER = OmniVoiceAdapter(24000)
CLIP = ReferenceAudio(np.zeros(2400, dtype=np.float32), 24000, "A transcript.")


def make(reference=None, **fields):
    return ADAPTER.stage_input(RequestParams(model="omnivoice", voice="default", fields=fields, reference=reference))


def test_capabilities():
    caps = ADAPTER.capabilities
    assert caps.sample_rate == 24000 and caps.voice_cloning and caps.streaming
    assert len(caps.languages) == len(language_table()) > 600 and "en" in caps.languages
    assert caps.voices == ("default",)


def test_voices():
    assert ADAPTER.resolve_voice("") == ADAPTER.resolve_voice("Auto") == "default"
    with pytest.raises(UnknownVoice):
        ADAPTER.resolve_voice("alloy")


def test_three_modes():
    auto = make()
    assert auto.reference is None and auto.instruction is None and auto.language is None
    designed = make(instructions="Female, British Accent", language="English")
    assert designed.instruction == "Female, British Accent" and designed.language == "en"
    cloned = make(CLIP, ref_text="A transcript.")
    assert cloned.reference is CLIP


def test_languages_by_code_or_name_or_auto():
    assert language_code("zh") == language_code("Chinese") == language_code("chinese") == "zh"
    assert language_code("Auto") is None and language_code("") is None
    assert make(language="German").language == "de"


def test_decoding_settings_and_seed_and_speed():
    params = make(extra_params={"num_step": 8.0, "guidance_scale": 3, "position_temperature": 0, "denoise": False}, seed=4, speed=1.5)
    assert (params.generation.num_step, params.generation.guidance_scale, params.generation.position_temperature) == (8, 3.0, 0.0)
    assert params.generation.denoise is False and params.seed == 4 and params.speed == 1.5
    assert make(extra_params={"num_inference_steps": 4}).generation.num_step == 4
    assert make(extra_params={"preprocess_prompt": False}).preprocess_reference is False


@pytest.mark.parametrize(
    ("reference", "fields", "field", "reason"),
    [
        (None, {"language": "Klingon"}, "language", "UNSUPPORTED_LANGUAGE"),
        (None, {"instructions": "male, female"}, "instructions", "INVALID_VALUE"),
        (None, {"instructions": "british accent, 四川话"}, "instructions", "INVALID_VALUE"),
        (None, {"instructions": "robot"}, "instructions", "INVALID_VALUE"),
        (None, {"instructions": "male, " * 100}, "instructions", "TOO_LONG"),
        (None, {"ref_text": "text"}, "ref_text", "REF_AUDIO_REQUIRED"),
        (ReferenceAudio(np.zeros(10), 24000, None), {}, "ref_text", "REF_TEXT_REQUIRED"),
        (None, {"extra_params": {"top_k": 5}}, "extra_params", "FIELD_NOT_SUPPORTED"),
        (None, {"extra_params": {"num_step": 2.5}}, "extra_params.num_step", "INVALID_VALUE"),
        (None, {"extra_params": {"num_step": 0}}, "extra_params.num_step", "OUT_OF_RANGE"),
        (None, {"extra_params": {"guidance_scale": "high"}}, "extra_params.guidance_scale", "INVALID_VALUE"),
        (None, {"extra_params": {"denoise": 1}}, "extra_params.denoise", "INVALID_VALUE"),
    ],
)
def test_refusals_name_their_field(reference, fields, field, reason):
    with pytest.raises(InvalidField) as error:
        make(reference, **fields)
    assert (error.value.field, error.value.reason) == (field, reason)


def test_instruction_suggests_a_close_attribute():
    with pytest.raises(InvalidField, match="british accent"):
        make(instructions="britsh accent")
