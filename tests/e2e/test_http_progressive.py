"""HTTP sends every format as it is made (chunked transfer) when a stream is asked for, and all but WAV and FLAC
without one (those come whole, with their exact length).

The gated tone family makes the last of three sentences only once the test has opened its
gate, and the test opens it only after the first bytes of the body have arrived: a server
that held the audio back until the end would never send them (the family gives up after a
while and leaves a marker, which fails the test).
"""

from __future__ import annotations

import io
import struct
import wave

import av
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.gated_tts.family import RATE, TONE_SECONDS, write_checkpoint
from tests.serving import start_server

TEXT = "First comes a sentence of tone. Then a second sentence of tone. Last comes the third."


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    checkpoint = write_checkpoint(tmp_path_factory.mktemp("gated") / "gated-tones")
    server = start_server(tmp_path_factory.mktemp("gated-logs"), str(checkpoint), "--family-module", "tests.gated_tts.family")
    yield server, checkpoint
    server.stop()


def decoded_seconds(body: bytes, response_format: str) -> float:
    if response_format == "pcm":
        return len(body) / 2 / RATE
    with av.open(io.BytesIO(body)) as container:
        rate = container.streams.audio[0].rate
        return sum(frame.samples for frame in container.decode(audio=0)) / rate


@pytest.mark.parametrize(
    "extra",
    [
        {"response_format": "pcm"},
        {"response_format": "wav", "stream_format": "audio"},  # streamed with an "unknown length" header
        {"response_format": "mp3"},
        {"response_format": "opus"},
        {"response_format": "aac"},
        {"response_format": "flac", "stream_format": "audio"},  # a FLAC file (no stream asked) waits, to hold its length
        {"response_format": "mp3", "stream_format": "audio"},
    ],
    ids=lambda extra: "-".join(extra.values()),
)
def test_first_bytes_leave_before_the_last_sentence_is_made(gated, extra):
    server, checkpoint = gated
    gate, timed_out = checkpoint / "gate", checkpoint / "gate-timed-out"
    gate.unlink(missing_ok=True)
    timed_out.unlink(missing_ok=True)
    body = bytearray()
    with httpx.stream("POST", f"{server.http_url}/v1/audio/speech", json={"input": TEXT, **extra}, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers.get("transfer-encoding") == "chunked" and "content-length" not in response.headers
        pieces = response.iter_raw()
        body += next(pieces)
        assert not timed_out.exists(), "the first bytes came only after the last sentence was made"
        gate.touch()  # now the last sentence may be made
        for piece in pieces:
            body += piece
    assert not timed_out.exists()
    seconds = decoded_seconds(bytes(body), extra["response_format"])
    assert 3 * TONE_SECONDS <= seconds <= 3 * TONE_SECONDS + 0.2  # all three sentences, plus codec padding


@pytest.mark.parametrize("response_format", ["flac", "wav"])
def test_a_file_is_whole_with_its_length(gated, response_format):
    server, checkpoint = gated
    (checkpoint / "gate").touch()
    body = {"input": TEXT, "response_format": response_format}
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200 and int(response.headers["content-length"]) == len(response.content)
    with sf.SoundFile(io.BytesIO(response.content)) as audio:
        assert audio.samplerate == RATE and audio.frames == 3 * int(RATE * TONE_SECONDS)  # from the header
        assert np.abs(audio.read()).max() > 0.3
    if response_format == "wav":  # the sizes in the header are the real ones, as Python's wave module reads them
        riff_size, data_size = struct.unpack_from("<I", response.content, 4)[0], struct.unpack_from("<I", response.content, 40)[0]
        assert riff_size == len(response.content) - 8 and data_size == len(response.content) - 44
        with wave.open(io.BytesIO(response.content)) as clip:
            assert clip.getnframes() / clip.getframerate() == pytest.approx(3 * TONE_SECONDS, abs=1 / RATE)


@pytest.mark.parametrize("response_format", ["mp3", None])  # None: the SDK sends none, so WAV, streamed when asked
def test_the_openai_sdk_streams(gated, response_format):
    from openai import OpenAI

    server, checkpoint = gated
    gate = checkpoint / "gate"
    gate.unlink(missing_ok=True)
    client = OpenAI(base_url=f"{server.http_url}/v1", api_key="unused")
    extra = {"response_format": response_format} if response_format else {"stream_format": "audio"}
    with client.audio.speech.with_streaming_response.create(model="gated-tones", voice="tone", input=TEXT, **extra) as response:
        pieces = response.iter_bytes()
        body = bytearray(next(pieces))
        assert not (checkpoint / "gate-timed-out").exists()
        gate.touch()
        for piece in pieces:
            body += piece
    assert decoded_seconds(bytes(body), response_format or "wav") >= 3 * TONE_SECONDS
