"""Proto enum numbers stop at the server: adapters see names (task_type 2 -> "voice_design")."""

from __future__ import annotations

import grpc
import pytest

from vocalis.server.errors import StatusError
from vocalis.server.session_config import adapter_fields, set_fields
from vocalis.tts.v1 import synthesizer_pb2 as pb


def test_enum_fields_reach_adapters_as_names_and_universal_fields_not_at_all():
    config = pb.SessionConfig(model="m", voice="v", task_type=pb.TASK_TYPE_VOICE_DESIGN, language="English", seed=3)
    assert adapter_fields(config, set_fields(config)) == {"task_type": "voice_design", "language": "English", "seed": 3}
    for number, name in ((1, "custom_voice"), (3, "base")):
        config = pb.SessionConfig(task_type=number)
        assert adapter_fields(config, set_fields(config)) == {"task_type": name}


def test_an_enum_number_the_proto_does_not_define_is_refused_by_name():
    config = pb.SessionConfig(task_type=7)  # proto3 enums are open: a newer client may send it
    with pytest.raises(StatusError) as caught:
        adapter_fields(config, set_fields(config))
    error = caught.value
    assert (error.code, error.field, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "task_type", "INVALID_VALUE")
    assert "unknown task_type 7" in str(error)
