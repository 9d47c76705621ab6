"""Decoding callers' audio: every common format, bounded by the length limit, and hostile headers refused by name."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest
import soundfile as sf

from vocalis.server.audio_decoding import AudioTooLong, UndecodableAudio, decode_audio


def tone(seconds: float, rate: int = 16000, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    mono = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    return np.repeat(mono[:, None], channels, axis=1)


def encoded(seconds: float, fmt: str, rate: int = 16000, channels: int = 1) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, tone(seconds, rate, channels), rate, format=fmt)
    return buffer.getvalue()


def m4a(seconds: float, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate, layout="mono")
        samples = tone(seconds, rate)[:, 0]
        for start in range(0, len(samples), 1024):
            frame = av.AudioFrame.from_ndarray(samples[None, start:start + 1024], format="flt", layout="mono")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", ["WAV", "FLAC", "OGG"])
def test_libsndfile_formats(fmt):
    audio = decode_audio(encoded(2.0, fmt, channels=2), max_seconds=30)
    assert audio.sample_rate == 16000 and audio.seconds == pytest.approx(2.0, abs=0.01)
    assert float(np.abs(audio.samples).max()) == pytest.approx(0.3, abs=0.02)


def test_pyav_formats_decode_and_stop_at_the_limit():
    audio = decode_audio(m4a(2.0), max_seconds=30)
    assert audio.sample_rate == 16000 and audio.seconds == pytest.approx(2.0, abs=0.2)  # AAC adds priming and padding
    with pytest.raises(AudioTooLong) as caught:
        decode_audio(m4a(40.0), max_seconds=30)
    assert not caught.value.exact and 30 <= caught.value.seconds < 31


def test_length_from_the_header_refuses_before_decoding():
    with pytest.raises(AudioTooLong) as caught:
        decode_audio(encoded(31.0, "FLAC", rate=8000), max_seconds=30)
    assert caught.value.exact and caught.value.seconds == pytest.approx(31.0)
    assert decode_audio(encoded(31.0, "FLAC", rate=8000)).seconds == pytest.approx(31.0)  # no limit: decoded whole


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (encoded(1.0, "WAV", rate=500), "500 Hz"),
        (encoded(0.1, "WAV", channels=20), "20 channels"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x00\x00data\x00\x00\x00\x00",
         "0 bits per sample"),
        (b"not audio" * 50, "not audio"),
        (b"", "empty"),
    ],
    ids=["rate", "channels", "zero-bits", "garbage", "empty"],
)
def test_hostile_headers_are_named(data, text):
    with pytest.raises(UndecodableAudio) as caught:
        decode_audio(data, max_seconds=30)
    assert text in str(caught.value)
