"""The field policy's rows of the edge policy (docs/API.md), decided once for every family, on stand-in models:
what is dropped with a warning (rule 2, a refusal under --strict-fields), and what is refused whatever the model."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from vocalis.server import field_policy
from vocalis.server.errors import StatusError
from vocalis.stages.api.extra_params import ExtraParam
from vocalis.stages.api.model import Capabilities, LoadedModel
from vocalis.tts.v1 import synthesizer_pb2 as pb

KNOB = ExtraParam("temperature", float, "sampling temperature", minimum=0)


def model(accepted: set[str], voices: tuple[str, ...] = ("default",), **capabilities) -> LoadedModel:
    caps = Capabilities(sample_rate=16000, voices=voices, default_voice=voices[0] if voices else "", accepted_fields=frozenset(accepted),
                        **capabilities)
    return LoadedModel(name="m", family="test", capabilities=caps, adapter=None, pipeline=None)  # type: ignore[arg-type]


TOKENS = model({"seed", "max_new_tokens", "extra_params"}, extra_params=(KNOB,))
"""A token model with one declared extra param."""
PLAIN = model({"speed"})
"""A model without tokens, extra params, instructions or languages (Piper-like)."""


def extra(**values) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def apply(config: pb.SessionConfig, on: LoadedModel, strict: bool = False) -> list[tuple[str, str]]:
    return [(w.field, w.code) for w in field_policy.apply(config, on, strict)]


def refused(config: pb.SessionConfig, on: LoadedModel, strict: bool = False) -> StatusError:
    with pytest.raises(StatusError) as caught:
        field_policy.apply(config, on, strict)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value


def test_an_undeclared_extra_params_key_is_dropped_with_a_warning_and_declared_ones_stay():
    config = pb.SessionConfig(extra_params=extra(no_such_knob=1, temperature=0.5))
    assert apply(config, TOKENS) == [("extra_params.no_such_knob", "FIELD_IGNORED")]
    assert dict(config.extra_params.fields) == {"temperature": struct_pb2.Value(number_value=0.5)}


def test_extra_params_on_a_model_that_declares_none_are_dropped_whole():
    config = pb.SessionConfig(extra_params=extra(no_such_knob=1))
    assert apply(config, PLAIN) == [("extra_params.no_such_knob", "FIELD_IGNORED")]
    assert not config.HasField("extra_params")
    empty = pb.SessionConfig(extra_params=extra())
    assert apply(empty, PLAIN) == [] and not empty.HasField("extra_params")  # an empty object is neutral


def test_an_undeclared_extra_params_key_is_refused_under_strict_fields():
    error = refused(pb.SessionConfig(extra_params=extra(no_such_knob=1)), TOKENS, strict=True)
    assert (error.field, error.reason) == ("extra_params.no_such_knob", "FIELD_NOT_SUPPORTED")


@pytest.mark.parametrize("on", [TOKENS, PLAIN], ids=["tokens", "no tokens"])
@pytest.mark.parametrize("value", [0, 4097, 1_000_000])
def test_max_new_tokens_outside_the_api_range_is_refused_on_every_model(on, value):
    error = refused(pb.SessionConfig(max_new_tokens=value), on)
    assert (error.field, error.reason) == ("max_new_tokens", "OUT_OF_RANGE")


def test_max_new_tokens_in_range_is_kept_or_warned_by_whether_the_model_has_tokens():
    kept = pb.SessionConfig(max_new_tokens=50)
    assert apply(kept, TOKENS) == [] and kept.max_new_tokens == 50
    dropped = pb.SessionConfig(max_new_tokens=50)
    assert apply(dropped, PLAIN) == [("max_new_tokens", "FIELD_IGNORED")] and not dropped.HasField("max_new_tokens")


def test_instructions_and_language_on_a_model_without_them_are_warned_and_auto_is_silent():
    assert apply(pb.SessionConfig(instructions="Speak softly."), PLAIN) == [("instructions", "FIELD_IGNORED")]
    assert apply(pb.SessionConfig(language="xx-notalanguage"), PLAIN) == [("language", "FIELD_IGNORED")]
    assert apply(pb.SessionConfig(language="Auto"), PLAIN, strict=True) == []


DESIGN = model({"instructions", "task_type"}, voices=(), task="voice_design", instructions_decide_task=True)
"""Qwen3-TTS VoiceDesign: the instructions decide the task."""
INSTRUCTED = model({"instructions", "task_type"}, voices=(), instructions_decide_task=True)
"""AuK: task_type wraps the text, unless instructions give the whole instruction."""


def test_task_type_where_instructions_decide_is_warned_unless_it_is_the_checkpoints_own():
    other = pb.SessionConfig(instructions="A warm voice.", task_type=pb.TASK_TYPE_BASE)
    assert apply(other, DESIGN) == [("task_type", "FIELD_IGNORED")] and other.task_type == pb.TASK_TYPE_UNSPECIFIED
    own = pb.SessionConfig(instructions="A warm voice.", task_type=pb.TASK_TYPE_VOICE_DESIGN)
    assert apply(own, DESIGN) == [] and own.task_type == pb.TASK_TYPE_VOICE_DESIGN
    assert refused(pb.SessionConfig(instructions="A warm voice.", task_type=pb.TASK_TYPE_BASE), DESIGN, strict=True).field == "task_type"


def test_task_type_without_instructions_is_the_models_to_honour():
    config = pb.SessionConfig(task_type=pb.TASK_TYPE_CUSTOM_VOICE)
    assert apply(config, INSTRUCTED) == [] and config.task_type == pb.TASK_TYPE_CUSTOM_VOICE
    beside = pb.SessionConfig(instructions="Say hi.", task_type=pb.TASK_TYPE_CUSTOM_VOICE)
    assert apply(beside, INSTRUCTED) == [("task_type", "FIELD_IGNORED")]


def test_task_type_on_a_model_that_has_none_is_warned():
    assert apply(pb.SessionConfig(task_type=pb.TASK_TYPE_BASE), PLAIN) == [("task_type", "FIELD_IGNORED")]


def test_an_unknown_voice_is_warned_only_where_the_model_has_no_voice_of_its_own():
    missing = StatusError(grpc.StatusCode.NOT_FOUND, "unknown voice", "UNKNOWN_VOICE", "voice")
    config = pb.SessionConfig(voice="no-such-voice")
    warning = field_policy.ignore_unknown_voice(config, DESIGN, missing, strict=False)
    assert warning is not None and warning.field == "voice" and config.voice == ""
    assert field_policy.ignore_unknown_voice(pb.SessionConfig(voice="no-such-voice"), TOKENS, missing, strict=False) is None
    assert field_policy.ignore_unknown_voice(pb.SessionConfig(voice="no-such-voice"), DESIGN, missing, strict=True) is None


def test_a_voice_beside_ref_audio_is_warned():
    cloning = model({"ref_audio", "ref_text"}, voice_cloning=True)
    config = pb.SessionConfig(voice="no-such-voice", ref_audio="data:audio/wav;base64,AAAA")
    assert apply(config, cloning) == [("voice", "FIELD_IGNORED")] and config.voice == ""
