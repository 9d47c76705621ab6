"""The Python client library against a real server: files, streams, incremental sessions, typed errors."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from tests.audio_checks import assert_speech
from vocalis.clients import AsyncClient, Client, errors, session_config


@pytest.fixture(scope="module")
def client(server):
    with Client(server.grpc_target, timeout=60, api_key="test-key") as c:
        yield c


def test_synthesize_to_file_follows_the_extension(client, tmp_path):
    result = client.synthesize_to_file("A file for the library test.", tmp_path / "out.flac")
    samples, rate = sf.read(tmp_path / "out.flac")
    assert rate == result.sample_rate == 22050
    assert len(samples) / rate == pytest.approx(result.audio_seconds, abs=0.01)
    assert_speech(samples, rate)


def test_synthesize_to_bytes(client):
    result = client.synthesize(session_config(format="wav", stream=False, sample_rate=16000), "Bytes in memory.")
    samples, rate = sf.read(io.BytesIO(result.audio))
    assert rate == 16000 == result.sample_rate and len(samples) > 8000
    assert result.done.utterance_count == len(result.utterances) >= 1


def test_stream_chunks_carry_sample_counts(client):
    chunks = [
        r.audio for r in client.stream(session_config(format="pcm"), "First sentence here. Second sentence there.")
        if r.WhichOneof("response") == "audio"
    ]
    assert len(chunks) >= 2
    assert sum(c.num_samples for c in chunks) == sum(len(c.audio) for c in chunks) // 2


def test_incremental_session(client):
    with client.session(session_config(format="pcm")) as session:
        session.send("Text that arrives ")
        session.send("in pieces, like words from a language model. ")
        session.flush("first")
        session.send("And a second part after the flush.")
        session.end()
        kinds = []
        audio = bytearray()
        for response in session:
            kind = response.WhichOneof("response")
            kinds.append(kind)
            if kind == "audio":
                audio += response.audio.audio
            elif kind == "flush_done":
                assert response.flush_done.flush_id == "first"
    assert kinds[0] == "session_started" and kinds[-1] == "session_done" and "flush_done" in kinds
    samples = np.frombuffer(bytes(audio), dtype="<i2").astype(np.float32) / 32768
    assert len(samples) / 22050 > 2.0
    assert_speech(samples, 22050)


def test_a_session_can_be_cancelled(client):
    with client.session(session_config(format="pcm")) as session:
        session.send("This session is abandoned before it is finished. " * 5)
        first = next(iter(session))
        assert first.WhichOneof("response") == "session_started"
    with pytest.raises(RuntimeError, match="ended"):
        session.send("too late")


def test_typed_errors_name_the_field(client):
    with pytest.raises(errors.NotFound) as caught:
        client.synthesize(session_config(voice="nobody"), "Hi.")
    assert caught.value.reason == "UNKNOWN_VOICE"
    with pytest.raises(errors.InvalidArgument) as caught:
        client.synthesize(session_config(speed=9.0), "Hi.")
    assert "speed" in caught.value.field


def test_a_short_deadline_is_deadline_exceeded(client):
    with pytest.raises(errors.DeadlineExceeded):
        client.synthesize(session_config(format="pcm", stream=False), "A long text that cannot finish in a millisecond. " * 20, timeout=0.001)


def test_models_and_voices(client):
    (model,) = client.list_models()
    assert client.get_model(model.name).capabilities.sample_rate == 22050
    specs = {spec.name: spec for spec in client.get_model(model.name).capabilities.extra_param_specs}
    noise = specs["noise_scale"]  # Piper's declared extra_params, with their types and ranges
    assert (noise.type, noise.minimum, noise.maximum, noise.exclusive_minimum) == ("number", 0, 2, False)
    assert noise.HasField("minimum") and "noise" in noise.description.lower()
    assert set(specs) == set(model.capabilities.extra_params) == {"noise_scale", "noise_w_scale"}
    names = [voice.name for voice in client.list_voices(model.name)]
    assert model.capabilities.default_voice in names
    assert client.get_voice(names[0].upper()).name == names[0]
    with pytest.raises(errors.NotFound):
        client.get_voice("nobody")
    assert client.serving()


async def test_async_client(server):
    async with AsyncClient(server.grpc_target, timeout=60, api_key="test-key") as client:
        audio = bytearray()
        async for response in client.synthesize(session_config(format="pcm"), "From the async client."):
            if response.WhichOneof("response") == "audio":
                audio += response.audio.audio
        assert len(audio) / 2 / 22050 > 0.5
        assert [v.name for v in await client.list_voices()]
        with pytest.raises(errors.NotFound):
            await client.get_voice("nobody")
