"""Hypothesis over the gRPC contract: random messages, in any order, never an INTERNAL, a hang or a crash (seed: seeding.py)."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.seeding import fuzzed
from vocalis.tts.v1 import models_pb2, models_pb2_grpc, synthesizer_pb2_grpc, voices_pb2, voices_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

SERVER_FAULTS = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.DATA_LOSS}
texts = st.one_of(st.text(max_size=80), st.text(alphabet="abc .!?\n", max_size=300), st.just("x" * 6000))
floats = st.floats(allow_nan=True, allow_infinity=True, width=32)


@st.composite
def configs(draw) -> pb.SessionConfig:
    config = pb.SessionConfig()
    if draw(st.booleans()):
        config.model = draw(st.sampled_from(["", "en_US-joe-medium", "EN_us-JOE-medium", "nope", "\x00"]))
    if draw(st.booleans()):
        config.voice = draw(st.sampled_from(["", "default", "en_US-joe-medium", "../etc", "nobody"]))
    config.encoding = draw(st.integers(-1, 9))
    config.delivery = draw(st.integers(-1, 4))
    for name, strategy in (
        ("sample_rate", st.integers(-(2**31), 2**31 - 1)),
        ("speed", floats),
        ("seed", st.integers(-(2**63), 2**63 - 1)),
        ("language", st.text(max_size=20)),
        ("instructions", st.text(max_size=50)),
        ("ref_audio", st.text(max_size=50)),
        ("ref_text", st.text(max_size=50)),
        ("max_new_tokens", st.integers(-(2**31), 2**31 - 1)),
        ("initial_codec_chunk_frames", st.integers(-(2**31), 2**31 - 1)),
    ):
        if draw(st.integers(0, 5)) == 0:
            setattr(config, name, draw(strategy))
    if draw(st.integers(0, 6)) == 0:
        config.speaker_embedding.extend(draw(st.lists(floats, max_size=10)))
    if draw(st.integers(0, 4)) == 0:
        extra = draw(st.dictionaries(st.sampled_from(["noise_scale", "noise_w_scale", "temperature", ""]), st.one_of(floats, st.text(max_size=5), st.booleans()), max_size=3))
        config.extra_params.update({k: v for k, v in extra.items()})
    if draw(st.integers(0, 4)) == 0:
        config.task_type = draw(st.integers(0, 5))
    return config


@st.composite
def sessions(draw) -> list[pb.SynthesizeRequest]:
    messages = []
    if draw(st.integers(0, 9)):  # usually a config first; sometimes not at all
        messages.append(pb.SynthesizeRequest(config=draw(configs())))
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "text", "flush", "clear", "config", "empty"]))
        if kind == "text":
            messages.append(pb.SynthesizeRequest(text=pb.TextInput(text=draw(texts))))
        elif kind == "flush":
            messages.append(pb.SynthesizeRequest(flush=pb.Flush(flush_id=draw(st.text(max_size=10) | st.just("f" * 300)))))
        elif kind == "clear":
            messages.append(pb.SynthesizeRequest(clear=pb.Clear()))
        elif kind == "config":
            messages.append(pb.SynthesizeRequest(config=draw(configs())))
        else:
            messages.append(pb.SynthesizeRequest())
    return messages


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        yield channel


@given(messages=sessions())
@fuzzed(max_examples=120)
def test_synthesize_never_faults(channel, server, messages):
    stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
    since = server.log_path.stat().st_size
    try:
        list(stub.Synthesize(iter(messages), timeout=60))
    except grpc.RpcError as error:
        assert error.code() not in SERVER_FAULTS, (error.code(), error.details(), messages)
    assert server.alive()
    assert "Traceback" not in server.log_path.read_text(errors="replace")[since:], messages


@given(
    name=st.text(max_size=70),
    audio=st.binary(max_size=4096) | st.just(b"RIFF\xff\xfe\x00\x00WAVEfmt "),
    consent=st.text(max_size=10),
    embedding=st.lists(floats, max_size=20),
)
@fuzzed(max_examples=80)
def test_voice_rpcs_never_fault(channel, server, name, audio, consent, embedding):
    since = server.log_path.stat().st_size
    voices = voices_pb2_grpc.VoicesStub(channel)
    models = models_pb2_grpc.ModelsStub(channel)
    calls = [
        lambda: voices.CreateVoice(voices_pb2.CreateVoiceRequest(name=name, audio=audio, consent=consent), timeout=30),
        lambda: voices.CreateVoice(voices_pb2.CreateVoiceRequest(name=name, speaker_embedding=embedding, consent=consent), timeout=30),
        lambda: voices.GetVoice(voices_pb2.GetVoiceRequest(name=name), timeout=30),
        lambda: voices.DeleteVoice(voices_pb2.DeleteVoiceRequest(name=name), timeout=30),
        lambda: voices.ListVoices(voices_pb2.ListVoicesRequest(model=name), timeout=30),
        lambda: models.GetModel(models_pb2.GetModelRequest(name=name), timeout=30),
    ]
    for call in calls:
        try:
            call()
        except grpc.RpcError as error:
            assert error.code() not in SERVER_FAULTS, (error.code(), error.details())
    assert "Traceback" not in server.log_path.read_text(errors="replace")[since:]
