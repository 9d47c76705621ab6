"""The VoxCPM2 adapter: capabilities, the three cloning modes, and every refused field named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.goldens.voxcpm2.cases import HERE
from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Adapter
from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams


@pytest.fixture(scope="module")
def adapter() -> VoxCPM2Adapter:
    return VoxCPM2Adapter(VoxCPM2Config.from_dir(HERE / "tiny"))


def params(reference: ReferenceAudio | None = None, **fields) -> RequestParams:
    return RequestParams(model="voxcpm2-tiny", voice="" if reference else "default", fields=fields, reference=reference)


def clip(text: str | None = None, name: str | None = None, **artifacts) -> ReferenceAudio:
    return ReferenceAudio(np.full(16000, 0.1, np.float32), 24000, text=text, name=name, artifacts=artifacts)


def refused(adapter, request: RequestParams) -> InvalidField:
    with pytest.raises(InvalidField) as caught:
        adapter.stage_input(request)
    return caught.value


def test_capabilities(adapter):
    caps = adapter.capabilities
    assert caps.sample_rate == 48000 and caps.voices == ("default",) and caps.voice_cloning and caps.streaming
    assert caps.accepted_fields == {"seed", "max_new_tokens", "extra_params", "ref_audio", "ref_text", "initial_codec_chunk_frames"}
    assert {p.name for p in caps.extra_params} == {"cfg_value", "inference_timesteps", "min_len", "clone_mode"}
    assert adapter.resolve_voice("") == adapter.resolve_voice("DEFAULT") == "default"
    with pytest.raises(UnknownVoice):
        adapter.resolve_voice("alice")


def test_modes(adapter):
    assert adapter.stage_input(params()).mode == "zero_shot"
    reference = adapter.stage_input(params(clip()))
    assert reference.mode == "reference" and reference.prompt_text == ""
    continuation = adapter.stage_input(params(clip("I am a voice.")))
    assert continuation.mode == "continuation" and continuation.prompt_text == "I am a voice."
    assert continuation.prompt.sample_rate == 24000 and len(continuation.prompt.samples) == 16000
    both = adapter.stage_input(params(clip("I am a voice."), extra_params={"clone_mode": "ref_continuation"}))
    assert both.mode == "ref_continuation" and both.reference is not None and both.prompt is not None
    forced = adapter.stage_input(params(clip("I am a voice."), extra_params={"clone_mode": "reference"}))
    assert forced.mode == "reference"


def test_settings(adapter):
    values = adapter.stage_input(
        params(seed=5, max_new_tokens=40, initial_codec_chunk_frames=2, extra_params={"cfg_value": 1.5, "inference_timesteps": 6.0, "min_len": 7})
    )
    assert (values.seed, values.max_new_tokens, values.initial_codec_chunk_frames) == (5, 40, 2)
    assert (values.cfg_value, values.inference_timesteps, values.min_len) == (1.5, 6, 7)
    defaults = adapter.stage_input(params())
    assert (defaults.cfg_value, defaults.inference_timesteps, defaults.min_len, defaults.max_new_tokens) == (2.0, 10, 2, None)


@pytest.mark.parametrize(
    ("request_fields", "field", "reason"),
    [
        ({"extra_params": {"temperature": 0.7}}, "extra_params", "FIELD_NOT_SUPPORTED"),
        ({"extra_params": {"cfg_value": 11}}, "extra_params.cfg_value", "OUT_OF_RANGE"),
        ({"extra_params": {"cfg_value": "high"}}, "extra_params.cfg_value", "INVALID_VALUE"),
        ({"extra_params": {"inference_timesteps": 2.5}}, "extra_params.inference_timesteps", "INVALID_VALUE"),
        ({"extra_params": {"inference_timesteps": 0}}, "extra_params.inference_timesteps", "OUT_OF_RANGE"),
        ({"extra_params": {"min_len": -1}}, "extra_params.min_len", "OUT_OF_RANGE"),
        ({"extra_params": {"clone_mode": "mimic"}}, "extra_params.clone_mode", "INVALID_VALUE"),
        ({"extra_params": {"clone_mode": "reference"}}, "extra_params.clone_mode", "REF_AUDIO_REQUIRED"),
        ({"max_new_tokens": 4097}, "max_new_tokens", "OUT_OF_RANGE"),
        ({"initial_codec_chunk_frames": 0}, "initial_codec_chunk_frames", "OUT_OF_RANGE"),
        ({"ref_text": "words"}, "ref_text", "REF_AUDIO_REQUIRED"),
    ],
)
def test_refusals_name_the_field(adapter, request_fields, field, reason):
    error = refused(adapter, params(**request_fields))
    assert (error.field, error.reason) == (field, reason), error.message
    if reason == "FIELD_NOT_SUPPORTED":
        assert "temperature" in error.message and "cfg_value" in error.message


def test_voice_refusals(adapter):
    error = refused(adapter, params(clip(), extra_params={"clone_mode": "continuation"}))
    assert (error.field, error.reason) == ("ref_text", "REF_TEXT_REQUIRED")
    stored = refused(adapter, params(clip(name="bob"), extra_params={"clone_mode": "ref_continuation"}))
    assert (stored.field, stored.reason) == ("voice", "REF_TEXT_REQUIRED")
    embedding_only = ReferenceAudio(np.zeros(0, np.float32), 24000, name="emb", artifacts={"speaker_embedding": np.zeros(16)})
    error = refused(adapter, params(embedding_only))
    assert (error.field, error.reason) == ("voice", "VOICE_NOT_SUPPORTED")
    bad = ReferenceAudio(np.zeros(0, np.float32), 24000, name="lat", artifacts={"ref_audio_feat": np.zeros((3, 4, 8))})
    error = refused(adapter, params(bad))
    assert (error.field, error.reason) == ("voice", "INVALID_VOICE_ARTIFACT")


def test_precomputed_latents(adapter):
    latents = np.random.default_rng(0).standard_normal((5, 2, 8)).astype(np.float32)
    voice = ReferenceAudio(np.zeros(0, np.float32), 24000, text="hi there", name="narrator", artifacts={"audio_feat": latents, "ref_audio_feat": latents[:2]})
    both = adapter.stage_input(params(voice, extra_params={"clone_mode": "ref_continuation"}))
    assert torch.equal(both.prompt.latents, torch.from_numpy(latents)) and both.reference.latents.shape == (2, 2, 8)
    assert both.prompt.samples is None
