"""`vocalis say` as a subprocess against a real server."""

from __future__ import annotations

import subprocess
import sys

import av
import soundfile as sf

from tests.audio_checks import assert_speech


def say(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vocalis.server", "say", "--server", server.grpc_target, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_say_writes_a_wav(server, tmp_path):
    out = tmp_path / "hello.wav"
    result = say(server, "Hello from the command line.", "-o", str(out))
    assert result.returncode == 0, result.stderr
    samples, rate = sf.read(out)
    assert rate == 22050
    assert_speech(samples, rate)


def test_say_streams_other_formats(server, tmp_path):
    out = tmp_path / "hello.flac"
    result = say(server, "Streaming to flac.", "-o", str(out), "--stream")
    assert result.returncode == 0, result.stderr
    # A streamed FLAC cannot know its length up front, and libsndfile refuses such a file; FFmpeg reads it.
    with av.open(str(out)) as container:
        rate = container.streams.audio[0].rate
        samples = sum(frame.samples for frame in container.decode(audio=0))
    assert rate == 22050 and samples > 11025
    streamed_wav = tmp_path / "streamed.wav"
    result = say(server, "Streaming a wav.", "-o", str(streamed_wav), "--stream", "--sample-rate", "16000")
    assert result.returncode == 0, result.stderr
    samples, rate = sf.read(streamed_wav)
    assert rate == 16000 and len(samples) > 8000


def test_say_reports_errors(server, tmp_path):
    result = say(server, "Hi.", "-o", str(tmp_path / "x.wav"), "--voice", "nobody")
    assert result.returncode != 0
    assert "NOT_FOUND" in result.stderr and "nobody" in result.stderr
