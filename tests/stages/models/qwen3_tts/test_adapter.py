"""Which fields each Qwen3-TTS checkpoint kind honours, and the errors that name the field at fault."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from tests.stages.models.qwen3_tts.goldens import golden, modules
from tests.tolerance import rounding_bound, traced
from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.models.qwen3_tts.adapter import Qwen3TTSAdapter
from vocalis.stages.models.qwen3_tts.prompt import Conditioning
from vocalis.stages.models.qwen3_tts.tokenizer import MISTRAL_PATTERN, QWEN2_PATTERN, split_pattern
from vocalis.stages.models.qwen3_tts.voices import VoiceCloner, voice_artifacts
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest


def adapter(variant: str) -> Qwen3TTSAdapter:
    return Qwen3TTSAdapter(modules(variant))


def params(voice: str = "", reference: ReferenceAudio | None = None, **fields) -> RequestParams:
    return RequestParams(model="m", voice=voice, fields=fields, reference=reference)


def cloned(variant: str, inputs) -> Conditioning:
    """The conditioning the talker sees: the clone encoded on the stage thread (in the worker's inference mode), as
    VoiceCloner does it."""
    loop = asyncio.new_event_loop()
    try:
        with torch.inference_mode():
            return VoiceCloner(modules(variant)).conditioning(SynthesisRequest("text", inputs, AudioOutput(loop)))
    finally:
        loop.close()


def clip(text: str | None = "She sells sea shells.") -> ReferenceAudio:
    return ReferenceAudio(golden("base-1b7.base_icl")["ref_audio"].numpy(), 24000, text=text)


def xvector_bound() -> float:
    """float32 rounding along the speaker encoder's path from the golden clip's log-mel, traced: what our encoder and
    the reference's round differently (the log-mel itself agrees to a few eps, test_goldens.py)."""
    from vocalis.stages.components.speech_features import matcha_log_mel
    from vocalis.stages.models.qwen3_tts.speaker import SPEAKER_MEL

    mel = matcha_log_mel(golden("base-1b7.base_icl")["ref_audio"], **SPEAKER_MEL)
    with torch.inference_mode(), traced() as path:
        modules("base-1b7").speaker_encoder(mel[None])
    return rounding_bound(torch.float32, path.peak, path.steps)


def fails(call, field: str, reason: str | None = None) -> InvalidField:
    with pytest.raises(InvalidField) as caught:
        call()
    assert caught.value.field == field, caught.value.message
    if reason:
        assert caught.value.reason == reason
    return caught.value


def test_accepted_fields_per_kind():
    cv, cv06, vd, base = (adapter(v).capabilities for v in ("cv-1b7", "cv-0b6", "vd-1b7", "base-1b7"))
    common = {"language", "task_type", "seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params"}
    assert cv.accepted_fields == common | {"instructions"}
    assert cv06.accepted_fields == common  # the 0.6B CustomVoice takes no instructions (the reference drops them)
    assert vd.accepted_fields == common | {"instructions"} and vd.required_fields == {"instructions"}
    assert base.accepted_fields == common | {"ref_audio", "ref_text", "x_vector_only_mode", "speaker_embedding"}
    assert base.voice_cloning and not cv.voice_cloning
    assert cv.sample_rate == 24000 and cv.voices == ("ryan", "vivian", "serena", "eric", "dylan") and cv.default_voice == "ryan"
    assert "Auto" in cv.languages and "English" in cv.languages and not any("Dialect" in x for x in cv.languages)


def test_custom_voice_presets_and_languages():
    a = adapter("cv-1b7")
    assert a.resolve_voice("Vivian") == "vivian" and a.resolve_voice("") == "ryan"
    with pytest.raises(UnknownVoice):
        a.resolve_voice("nobody")
    inputs = a.stage_input(params("eric", language="Chinese", instructions="calm"))
    assert inputs.conditioning.speaker == "eric" and inputs.conditioning.language == "chinese"
    assert inputs.conditioning.non_streaming and inputs.conditioning.instructions == "calm"
    err = fails(lambda: a.stage_input(params("ryan", language="Klingon")), "language", "UNSUPPORTED_LANGUAGE")
    assert "English" in err.message
    fails(lambda: a.stage_input(params("ryan", instructions="x" * 501)), "instructions")


def test_task_type_is_checked_against_the_checkpoint():
    fails(lambda: adapter("cv-1b7").stage_input(params("ryan", task_type="base")), "task_type", "TASK_NOT_SUPPORTED")
    err = fails(lambda: adapter("base-1b7").stage_input(params(task_type="voice_design", reference=clip())), "task_type")
    assert "Base checkpoint does not support task_type=VoiceDesign" in err.message
    assert adapter("vd-1b7").stage_input(params(task_type="voice_design", instructions="deep")).conditioning.instructions == "deep"


def test_voice_design_needs_instructions():
    fails(lambda: adapter("vd-1b7").stage_input(params(instructions="  ")), "instructions", "FIELD_REQUIRED")


def test_sampling_defaults_and_greedy():
    a = adapter("cv-1b7")
    inputs = a.stage_input(params("ryan"))
    assert inputs.sampling.temperature == 0.9 and inputs.sampling.top_k == 50 and inputs.sampling.repetition_penalty == 1.05
    assert inputs.subtalker.temperature == 0.9 and inputs.sampling.max_new_tokens == 4096
    greedy = a.stage_input(params("ryan", seed=3, max_new_tokens=40, extra_params={"temperature": 0, "subtalker_temperature": 0,
                                                                                  "non_streaming_mode": False}))
    assert greedy.sampling.greedy and greedy.subtalker.greedy and greedy.sampling.max_new_tokens == 40
    assert greedy.sampling.seed == 3 and not greedy.conditioning.non_streaming
    fails(lambda: a.stage_input(params("ryan", extra_params={"noise_scale": 1})), "extra_params", "FIELD_NOT_SUPPORTED")
    fails(lambda: a.stage_input(params("ryan", extra_params={"top_p": 0})), "extra_params.top_p", "OUT_OF_RANGE")
    fails(lambda: a.stage_input(params("ryan", extra_params={"top_k": 2.5})), "extra_params.top_k", "INVALID_VALUE")
    fails(lambda: a.stage_input(params("ryan", extra_params={"temperature": "hot"})), "extra_params.temperature")
    fails(lambda: a.stage_input(params("ryan", max_new_tokens=5000)), "max_new_tokens")
    fails(lambda: a.stage_input(params("ryan", initial_codec_chunk_frames=0)), "initial_codec_chunk_frames")


def test_base_icl_needs_ref_text_and_makes_codes_and_xvector():
    a = adapter("base-1b7")
    fails(lambda: a.stage_input(params()), "ref_audio", "REF_AUDIO_REQUIRED")
    fails(lambda: a.stage_input(params(reference=clip(None))), "ref_text", "REF_TEXT_REQUIRED")
    g = golden("base-1b7.base_icl")
    inputs = a.stage_input(params(reference=clip()))
    assert inputs.conditioning.xvector is None and inputs.conditioning.ref_codes is None  # the adapter encodes nothing
    conditioning = cloned("base-1b7", inputs)
    assert torch.equal(conditioning.ref_codes, g["ref_codes"])
    torch.testing.assert_close(conditioning.xvector, g["speaker_embedding"], atol=xvector_bound(), rtol=0)
    assert conditioning.ref_text == "She sells sea shells." and not conditioning.non_streaming


def test_base_x_vector_only_and_given_embedding():
    a = adapter("base-1b7")
    xvec = cloned("base-1b7", a.stage_input(params(reference=clip(None), x_vector_only_mode=True)))
    assert xvec.ref_codes is None and xvec.xvector is not None
    given = cloned("base-1b7", a.stage_input(params(speaker_embedding=[0.5] * 32)))
    assert torch.equal(given.xvector, torch.full((32,), 0.5))
    err = fails(lambda: a.stage_input(params(speaker_embedding=[0.1] * 7)), "speaker_embedding")
    assert "expected 32" in err.message


def test_stored_voice_artifacts_are_used_and_resampled_clips_work():
    a = adapter("base-1b7")
    stored = ReferenceAudio(np.zeros(0, np.float32), 24000, text=None, name="narrator",
                            artifacts={"speaker_embedding": np.full(32, 0.25, np.float32)})
    inputs = cloned("base-1b7", a.stage_input(params(reference=stored)))  # no audio: x-vector only, from the artifact
    assert inputs.ref_codes is None and float(inputs.xvector[0]) == 0.25
    audio = golden("base-1b7.base_icl")["ref_audio"].numpy()
    at_8k = ReferenceAudio(audio[::3].copy(), 8000, text="hi")  # any rate: resampled to 24 kHz
    assert cloned("base-1b7", a.stage_input(params(reference=at_8k))).ref_codes.shape[1] == 4
    wrong = ReferenceAudio(np.zeros(0, np.float32), 24000, name="x", artifacts={"speaker_embedding": np.ones(5, np.float32)})
    fails(lambda: a.stage_input(params(reference=wrong)), "voice", "INVALID_VALUE")  # checked before any stage runs


def test_cloning_fields_are_refused_on_other_kinds():
    fails(lambda: adapter("cv-1b7").stage_input(params("ryan", reference=clip())), "ref_audio", "FIELD_NOT_SUPPORTED")


def test_voice_artifacts_tool_matches_the_reference():
    g = golden("base-1b7.base_icl")
    with torch.inference_mode():  # as precompute.py runs it
        vector, codes = voice_artifacts(modules("base-1b7"), g["ref_audio"].numpy(), 24000)
    np.testing.assert_allclose(vector, g["speaker_embedding"].numpy(), atol=xvector_bound(), rtol=0)
    assert np.array_equal(codes, g["ref_codes"].numpy())


def test_tokenizer_split_pattern_follows_the_reference_rule():
    assert split_pattern("4.57.3") == MISTRAL_PATTERN and split_pattern(None) == MISTRAL_PATTERN
    assert split_pattern("4.57.1") == QWEN2_PATTERN and split_pattern("5.2.0") == QWEN2_PATTERN
    from tokenizers import Regex, pre_tokenizers

    def pieces(pattern):
        return [p for p, _ in pre_tokenizers.Split(Regex(pattern), behavior="isolated").pre_tokenize_str("CamelCase it's")]

    assert pieces(MISTRAL_PATTERN) != pieces(QWEN2_PATTERN)  # the choice matters for real vocabularies


def test_precompute_writes_a_loadable_voice(tmp_path):
    import json

    from vocalis.stages.models.qwen3_tts.precompute import main

    g = golden("base-1b7.base_icl")
    clip_path = tmp_path / "clip.wav"
    import soundfile as sf

    sf.write(str(clip_path), g["ref_audio"].numpy(), 24000, subtype="FLOAT")
    main([str(modules("base-1b7").path), str(clip_path), "--name", "narrator", "--out", str(tmp_path / "voices"),
          "--ref-text", "She sells sea shells."])
    manifest = json.loads((tmp_path / "voices" / "manifest.json").read_text())
    entry = manifest["voices"][0]
    assert entry["name"] == "narrator" and entry["ref_text"] == "She sells sea shells." and entry["models"] == ["base-1b7"]
    vector = np.load(tmp_path / "voices" / entry["speaker_embedding"])
    np.testing.assert_allclose(vector, g["speaker_embedding"].numpy(), atol=xvector_bound(), rtol=0)
    assert np.array_equal(np.load(tmp_path / "voices" / entry["ref_codes"]), g["ref_codes"].numpy())
    stored = ReferenceAudio(np.zeros(0, np.float32), 24000, text=entry["ref_text"], name="narrator",
                            artifacts={"speaker_embedding": vector, "ref_codes": np.load(tmp_path / "voices" / entry["ref_codes"])})
    inputs = cloned("base-1b7", adapter("base-1b7").stage_input(params(reference=stored)))  # ICL from artifacts alone
    assert torch.equal(inputs.ref_codes, g["ref_codes"])
