"""The field policy (server/field_policy.py) through every protocol, on the embedded Piper voice:
neutral values pass silently, fields vLLM-Omni ignores pass with a warning, --strict-fields refuses them."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serving import start_server
from tests.ws_session import ws_session
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}
WARNED = [
    ({"instructions": "Speak softly."}, "FIELD_IGNORED instructions"),
    ({"task_type": "Base"}, "FIELD_IGNORED task_type"),
    ({"max_new_tokens": 300}, "FIELD_IGNORED max_new_tokens"),
    ({"initial_codec_chunk_frames": 4}, "FIELD_IGNORED initial_codec_chunk_frames"),
    ({"ref_text": "A transcript."}, "FIELD_IGNORED ref_text"),
    ({"colour": "blue"}, "UNKNOWN_FIELD colour"),
]


def speech(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hello there.", **body}, timeout=60)


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("strict"), "--strict-fields")
    yield running
    running.stop()


@pytest.mark.parametrize(("body", "header"), WARNED, ids=[h.split()[-1] for _, h in WARNED])
def test_ignored_fields_are_accepted_with_a_warning_header(server, body, header):
    plain = speech(server, extra_params=NOISELESS)
    warned = speech(server, extra_params=NOISELESS, **body)
    assert warned.status_code == 200, warned.text
    (value,) = warned.headers.get_list("x-vocalis-warning")
    assert value.startswith(header + ": ")
    assert warned.content == plain.content and "x-vocalis-warning" not in plain.headers


@pytest.mark.parametrize(("body", "header"), WARNED, ids=[h.split()[-1] for _, h in WARNED])
def test_strict_fields_refuses_what_would_be_a_warning(strict, body, header):
    response = speech(strict, **body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == header.split()[-1] and "--strict-fields" in error["message"]


def test_neutral_values_pass_silently_even_when_strict(strict):
    response = speech(strict, language="Auto", extra_params=NOISELESS)
    assert response.status_code == 200, response.text
    assert "x-vocalis-warning" not in response.headers


def test_values_the_model_cannot_honour_are_still_refused(server):
    response = speech(server, ref_audio="data:audio/wav;base64,AAAA")
    assert response.status_code == 400 and response.json()["error"]["param"] == "ref_audio"


def test_max_new_tokens_outside_the_api_range_is_refused_though_the_model_has_no_tokens(server):
    response = speech(server, max_new_tokens=1_000_000)
    assert response.status_code == 400 and response.json()["error"]["param"] == "max_new_tokens", response.text


def test_an_undeclared_extra_params_key_is_a_warning_and_strict_refuses_it(server, strict):
    plain = speech(server, extra_params=NOISELESS)
    warned = speech(server, extra_params={**NOISELESS, "no_such_knob": 1})
    assert warned.status_code == 200, warned.text
    (value,) = warned.headers.get_list("x-vocalis-warning")
    assert value.startswith("FIELD_IGNORED extra_params.no_such_knob: ") and warned.content == plain.content
    refused = speech(strict, extra_params={**NOISELESS, "no_such_knob": 1})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "extra_params.no_such_knob", refused.text


def test_several_warnings_each_get_a_header_and_sse_events(server):
    body = {"input": "Hello.", "instructions": "x", "max_new_tokens": 5, "stream": True, "response_format": "pcm"}
    with httpx.stream("POST", f"{server.http_url}/v1/audio/speech", json=body, timeout=60) as response:
        assert response.status_code == 200
        assert len(response.headers.get_list("x-vocalis-warning")) == 2
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    warnings = [e for e in events if e["type"] == "warning"]
    assert [w["param"] for w in warnings] == ["instructions", "max_new_tokens"]
    assert events[-1]["type"] == "speech.audio.done" and any(e["type"] == "speech.audio.delta" for e in events)


def test_grpc_sends_warning_messages_after_session_started(server):
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=3, unknown_fields=["streaming_mode"])
    with Client(server.grpc_target, timeout=60) as client:
        responses = list(client.stream(config, "Hello."))
    kinds = [r.WhichOneof("response") for r in responses]
    assert kinds[:3] == ["session_started", "warning", "warning"] and "audio" in kinds
    assert [(r.warning.code, r.warning.field) for r in responses[1:3]] == [
        ("UNKNOWN_FIELD", "streaming_mode"), ("FIELD_IGNORED", "max_new_tokens"),
    ]


def test_grpc_strict_refusal_names_the_field(strict):
    with Client(strict.grpc_target, timeout=60) as client, pytest.raises(VocalisError) as raised:
        client.synthesize(pb.SessionConfig(max_new_tokens=3), "Hello.")
    assert raised.value.field == "max_new_tokens" and raised.value.reason == "FIELD_NOT_SUPPORTED"


def test_websocket_sends_warning_events(server):
    frames = ws_session(server, {"response_format": "pcm", "max_new_tokens": 300, "colour": "red"}, "Hello.", timeout=30)
    warnings = [f for f in frames if isinstance(f, dict) and f["type"] == "warning"]
    assert sorted(w["param"] for w in warnings) == ["colour", "max_new_tokens"]
    assert any(isinstance(f, bytes) for f in frames)


def test_get_model_says_which_fields_are_ignored(server):
    with Client(server.grpc_target, timeout=60) as client:
        caps = client.get_model("").capabilities
    assert {"instructions", "task_type", "max_new_tokens", "initial_codec_chunk_frames", "ref_text"} <= set(caps.ignored_fields)
    assert not set(caps.ignored_fields) & set(caps.rejected_fields) and not set(caps.ignored_fields) & set(caps.accepted_fields)
    assert {"ref_audio", "speaker_embedding"} <= set(caps.rejected_fields)
