"""Request messages from plain values: unset fields stay unset."""

from __future__ import annotations

import pytest

from vocalis.clients.messages import format_for_path, session_config, voice_request
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2


def test_session_config_sets_only_what_is_given():
    config = session_config(format="pcm")
    assert config.encoding == audio_pb2.AUDIO_ENCODING_PCM
    assert config.delivery == synthesizer_pb2.AUDIO_DELIVERY_STREAM
    for name in ("sample_rate", "speed", "language", "instructions", "seed"):
        assert not config.HasField(name), name
    assert not config.HasField("extra_params")


def test_session_config_copies_values():
    config = session_config(
        model="m", voice="v", format="mp3", stream=False, sample_rate=16000, speed=1.5, seed=7,
        extra_params={"noise_scale": 0}, request_id="r1",
    )
    assert (config.model, config.voice, config.request_id) == ("m", "v", "r1")
    assert config.encoding == audio_pb2.AUDIO_ENCODING_MP3 and config.delivery == synthesizer_pb2.AUDIO_DELIVERY_FILE
    assert (config.sample_rate, config.speed, config.seed) == (16000, 1.5, 7)
    assert dict(config.extra_params) == {"noise_scale": 0}


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown format"):
        session_config(format="ogg")


def test_format_for_path():
    assert format_for_path("a/b.MP3") == "mp3"
    assert format_for_path("out.pcm") == "pcm"
    assert format_for_path("out") == "wav"
    assert format_for_path("out.txt", default="pcm") == "pcm"


def test_voice_request_reads_a_file(tmp_path):
    clip = tmp_path / "alice.wav"
    clip.write_bytes(b"RIFF....")
    request = voice_request("alice", clip, ref_text="hi", consent="c1", description="calm")
    assert request.audio == b"RIFF...." and request.mime_type in ("audio/x-wav", "audio/wav")
    assert (request.name, request.ref_text, request.consent, request.speaker_description) == ("alice", "hi", "c1", "calm")
    assert voice_request("bob", b"raw", mime_type="audio/flac").mime_type == "audio/flac"
