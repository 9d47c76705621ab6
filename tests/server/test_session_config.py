"""session_config: the splitter from text_splitting, validation that touches nothing, and the model's input."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from tests.server.fakes import RATE, fake_model
from vocalis.server import session_config
from vocalis.server.audio_encoding import Encoding
from vocalis.server.config import Limits
from vocalis.server.errors import StatusError
from vocalis.server.voice_resolver import ResolvedVoice
from vocalis.stages.text.sentence_splitter import DEFAULT_MAX_UNIT_CHARS, Granularity
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

LIMITS = Limits()


def refusal(call, *args) -> StatusError:
    with pytest.raises(StatusError) as caught:
        call(*args)
    return caught.value


def test_splitter_defaults_and_settings():
    default = session_config.text_splitter(pb.SessionConfig())
    assert default.granularity is Granularity.AUTO and default.max_unit_chars == DEFAULT_MAX_UNIT_CHARS
    config = pb.SessionConfig()
    config.text_splitting.granularity = pb.SPLIT_GRANULARITY_CLAUSE
    config.text_splitting.max_unit_chars = 40
    config.text_splitting.idle_flush_ms = 0
    splitter = session_config.text_splitter(config)
    assert (splitter.granularity, splitter.max_unit_chars, splitter.idle_flush_s) == (Granularity.CLAUSE, 40, None)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("granularity", 99, "INVALID_VALUE"),
        ("max_unit_chars", session_config.MIN_UNIT_CHARS - 1, "OUT_OF_RANGE"),
        ("idle_flush_ms", -1, "OUT_OF_RANGE"),
        ("idle_flush_ms", session_config.MAX_IDLE_FLUSH_MS + 1, "OUT_OF_RANGE"),
    ],
)
def test_splitter_refuses_naming_the_field(field, value, reason):
    config = pb.SessionConfig()
    setattr(config.text_splitting, field, value)
    error = refusal(session_config.text_splitter, config)
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, f"text_splitting.{field}", reason)


def test_validate_keeps_the_models_fields_and_never_calls_the_adapter():
    model = fake_model()
    config = pb.SessionConfig(voice="bob", speed=1.5, seed=7, encoding=audio_pb2.AUDIO_ENCODING_OPUS, sample_rate=44100)
    config.text_splitting.max_unit_chars = 50
    settings = session_config.validate(config, model, LIMITS)
    assert settings.params == {"speed": 1.5, "seed": 7}  # not voice, encoding, sample_rate or text_splitting
    assert settings.encoding is Encoding.OPUS and settings.sample_rate == 48000  # Opus's nearest legal rate
    assert settings.stream is True
    assert model.adapter.calls == []


@pytest.mark.parametrize(
    ("config", "field", "reason"),
    [
        (pb.SessionConfig(instructions="calm"), "instructions", "FIELD_NOT_SUPPORTED"),
        (pb.SessionConfig(ref_audio="AAAA"), "ref_audio", "FIELD_NOT_SUPPORTED"),
        (pb.SessionConfig(more_references=[pb.ReferenceClip(audio="AAAA", text="t")]), "more_references", "FIELD_NOT_SUPPORTED"),
        (pb.SessionConfig(speed=9.0), "speed", "OUT_OF_RANGE"),
        (pb.SessionConfig(encoding=77), "encoding", "INVALID_VALUE"),
        (pb.SessionConfig(sample_rate=10), "sample_rate", "OUT_OF_RANGE"),
        (pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_MP3, sample_rate=9000), "sample_rate", "UNSUPPORTED_SAMPLE_RATE"),
    ],
)
def test_validate_refuses_naming_the_field(config, field, reason):
    model = fake_model()
    error = refusal(session_config.validate, config, model, LIMITS)
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, field, reason)
    assert model.adapter.calls == []


def test_validate_names_a_missing_required_field():
    model = fake_model(accepted=frozenset({"instructions"}), required=frozenset({"instructions"}))
    error = refusal(session_config.validate, pb.SessionConfig(), model, LIMITS)
    assert (error.field, error.reason) == ("instructions", "FIELD_REQUIRED")


def test_extra_params_arrive_as_plain_values():
    model = fake_model(accepted=frozenset({"extra_params"}))
    config = pb.SessionConfig()
    extra = struct_pb2.Struct()
    extra.update({"top_k": 5, "nested": {"a": [1, "x"]}})
    config.extra_params.CopyFrom(extra)
    assert session_config.validate(config, model, LIMITS).params == {"extra_params": {"top_k": 5.0, "nested": {"a": [1.0, "x"]}}}


def test_resolve_builds_the_input_with_the_voice_and_a_fresh_encoder_each_time():
    model = fake_model()
    settings = session_config.validate(pb.SessionConfig(seed=3, encoding=audio_pb2.AUDIO_ENCODING_PCM), model, LIMITS)
    resolved = session_config.resolve(settings, ResolvedVoice(name="bob", preset="bob", reference=None))
    assert resolved.voice == "bob" and resolved.stage_input == {"voice": "bob", "fields": {"seed": 3}, "reference": None}
    first, second = settings.new_encoder(), settings.new_encoder(stream=False)
    assert first is not second and first.rate == second.rate == RATE and not second.stream


def test_resolve_turns_a_model_refusal_into_invalid_argument():
    settings = session_config.validate(pb.SessionConfig(seed=-1), fake_model(), LIMITS)
    error = refusal(session_config.resolve, settings, ResolvedVoice("alice", "alice", None))
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "seed", "INVALID_SEED")



@pytest.mark.parametrize(
    ("extra", "field", "reason"),
    [
        ({"noise_scale": float("nan")}, "extra_params.noise_scale", "INVALID_VALUE"),
        ({"a": {"b": [1.0, float("-inf")]}}, "extra_params.a.b[1]", "INVALID_VALUE"),
        ({"a": {"a": {"a": {"a": {"a": {"a": {"a": {"a": {"a": 1}}}}}}}}}, "extra_params.a.a.a.a.a.a.a.a", "TOO_DEEP"),
    ],
)
def test_extra_params_json_cannot_hold_are_refused_by_path(extra, field, reason):
    config = pb.SessionConfig()
    config.extra_params.update(extra)
    error = refusal(session_config.validate, config, fake_model(accepted=frozenset({"extra_params"})), LIMITS)
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, field, reason)
