"""The official openai package, pointed at the gateway, works unchanged."""

from __future__ import annotations

import io

import openai
import soundfile as sf

from tests.audio_checks import assert_speech


def test_create_and_stream(server, tmp_path):
    client = openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused")
    response = client.audio.speech.create(model="en_US-joe-medium", voice="en_US-joe-medium", input="Hello from the OpenAI SDK.")
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 22050
    assert_speech(samples, rate)

    target = tmp_path / "streamed.pcm"
    with client.audio.speech.with_streaming_response.create(
        model="en_US-joe-medium", voice="en_US-joe-medium", input="Streaming with the SDK.", response_format="pcm"
    ) as streamed:
        assert streamed.headers["x-sample-rate"] == "22050"
        streamed.stream_to_file(target)
    pcm = target.read_bytes()
    assert len(pcm) / 2 / 22050 > 0.5


def test_sdk_sees_errors(server):
    client = openai.OpenAI(base_url=f"{server.http_url}/v1", api_key="unused", max_retries=0)
    try:
        client.audio.speech.create(model="en_US-joe-medium", voice="nobody", input="Hi.")
    except openai.NotFoundError as error:
        assert "nobody" in str(error)
    else:
        raise AssertionError("expected a 404")
