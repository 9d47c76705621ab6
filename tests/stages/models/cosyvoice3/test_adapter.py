"""CosyVoice3's request side: the peer's required fields and messages, the sampler choice, the prompt-text
convention, and the speech-token budget from the text's length."""

from __future__ import annotations

import numpy as np
import pytest

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.cosyvoice3.adapter import CosyVoice3Adapter
from vocalis.stages.models.cosyvoice3.runtime import SpeechLM
from vocalis.stages.models.cosyvoice3.tokenizer import prompt_text
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

CLIP = ReferenceAudio(np.zeros(16000 * 3, dtype=np.float32), 16000, text="a short prompt.")


def params(reference=CLIP, **fields) -> RequestParams:
    return RequestParams(model="cosyvoice3", voice="default", fields=fields, reference=reference)


@pytest.fixture(scope="module")
def adapter(modules):
    return CosyVoice3Adapter(modules.config)


def test_ref_audio_and_ref_text_are_required_with_the_peers_messages(adapter):
    with pytest.raises(InvalidField, match=r"CosyVoice3 requires 'ref_audio' \(reference audio for voice cloning\)") as missing:
        adapter.stage_input(params(reference=None))
    assert missing.value.field == "ref_audio"
    with pytest.raises(InvalidField, match=r"CosyVoice3 requires 'ref_text' \(transcript of the reference audio\)") as no_text:
        adapter.stage_input(params(reference=ReferenceAudio(CLIP.samples, 16000)))
    assert no_text.value.field == "ref_text"
    stored = ReferenceAudio(CLIP.samples, 16000, name="alice")
    with pytest.raises(InvalidField) as stored_no_text:
        adapter.stage_input(params(reference=stored))
    assert stored_no_text.value.field == "voice"


def test_ras_by_default_and_the_standard_sampler_on_request(adapter):
    ras = adapter.stage_input(params(seed=3))
    assert ras.ras is not None and (ras.ras.top_p, ras.ras.top_k, ras.ras.win_size, ras.ras.tau_r) == (0.8, 25, 10, 0.1)
    assert ras.sampling.seed == 3 and ras.sampling.temperature == 1.0
    standard = adapter.stage_input(params(extra_params={"sampler": "standard", "top_k": 5}))
    assert standard.ras is None
    assert (standard.sampling.temperature, standard.sampling.top_k, standard.sampling.top_p, standard.sampling.repetition_penalty) == (0.7, 5, 0.8, 1.21)
    with pytest.raises(InvalidField) as wrong:
        adapter.stage_input(params(extra_params={"sampler": "standard", "win_size": 4}))
    assert wrong.value.field == "extra_params.win_size"


def test_max_new_tokens_range(adapter):
    assert adapter.stage_input(params(max_new_tokens=7)).max_new_tokens == 7
    with pytest.raises(InvalidField) as out_of_range:
        adapter.stage_input(params(max_new_tokens=0))
    assert out_of_range.value.field == "max_new_tokens"


def test_prompt_text_gets_the_default_instruction_unless_it_has_endofprompt():
    assert prompt_text("hi there.") == "You are a helpful assistant.<|endofprompt|>hi there."
    assert prompt_text("Speak slowly.<|endofprompt|>hi there.") == "Speak slowly.<|endofprompt|>hi there."


def test_token_budget_from_text_length(modules):
    lm = SpeechLM(modules, 4096)
    count = len(modules.tokenizer.encode("Hello world, this is a tiny voice."))
    assert lm.token_budget("Hello world, this is a tiny voice.") == (2 * count, 20 * count)
    assert lm.token_budget("hello " * 200)[1] == 2048  # the peer's ceiling
    assert modules.tokenizer.token_id("<|endofprompt|>") is not None


def test_reference_length_warnings_and_refusal(adapter):
    short = params(reference=ReferenceAudio(np.zeros(16000, dtype=np.float32), 16000, text="hi."))
    adapter.stage_input(short)
    assert short.warnings == [("ref_audio", "REFERENCE_LENGTH", "the reference clip is 1.0 s; CosyVoice3 clones best from 3 to 10 s")]
    fine = params()
    adapter.stage_input(fine)
    assert fine.warnings == []
    with pytest.raises(InvalidField) as too_long:
        adapter.stage_input(params(reference=ReferenceAudio(np.zeros(16000 * 31, dtype=np.float32), 16000, text="hi.", name="bob")))
    assert too_long.value.field == "voice" and too_long.value.reason == "REFERENCE_TOO_LONG"
