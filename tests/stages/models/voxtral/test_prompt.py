"""The request -> token ids layer against mistral-common 1.13.1's encode_speech_request, id for id
(tests/goldens/voxtral/make_tekken.py), on a tekken file cut from the one mistral-common ships."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vocalis.stages.models.voxtral.tekken import Tekken

HERE = Path(__file__).parents[3] / "goldens/voxtral"
GOLDENS = json.loads((HERE / "prompt_goldens.json").read_text())


@pytest.fixture(scope="module")
def tekken() -> Tekken:
    return Tekken(HERE / "tekken_tiny.json")


@pytest.mark.parametrize("case", GOLDENS["cases"], ids=lambda case: case["text"][:20])
def test_speech_prompt_ids_equal_mistral_common(tekken, case):
    prompt = tekken.speech_prompt(case["text"], case["voice"])
    assert prompt.ids == case["ids"]
    assert [prompt.ids[i] for i in prompt.voice_positions] == [24] * tekken.voice_tokens[case["voice"]]


@pytest.mark.parametrize("case", GOLDENS["references"], ids=lambda case: str(case["ref_samples"]))
def test_reference_clip_prompts_equal_mistral_common(tekken, case):
    """A clip's prompt holds its frames (ceil at 12.5 Hz) and the [END_AUDIO] one, as mistral-common counts them."""
    assert tekken.speech_prompt_rows(case["text"], tekken.reference_rows(case["ref_samples"])).ids == case["ids"]


def test_voice_names_are_case_insensitive_and_unknown_ones_fail(tekken):
    assert tekken.speech_prompt("hi", "Neutral_Female").ids == tekken.speech_prompt("hi", "neutral_female").ids
    with pytest.raises(ValueError, match="neutral_female"):
        tekken.speech_prompt("hi", "nobody")


def test_a_tekken_file_without_the_speech_specials_is_refused(tmp_path):
    data = json.loads((HERE / "tekken_tiny.json").read_text())
    data["special_tokens"] = [t for t in data["special_tokens"] if t["token_str"] != "[NEXT_AUDIO_TEXT]"]
    (tmp_path / "tekken.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"\[NEXT_AUDIO_TEXT\]"):
        Tekken(tmp_path / "tekken.json")
