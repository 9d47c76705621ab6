"""Request messages built from plain Python values, and the names of the audio formats."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from vocalis.tts.v1 import audio_pb2, synthesizer_pb2, voices_pb2

FORMATS = {
    "wav": audio_pb2.AUDIO_ENCODING_WAV,
    "pcm": audio_pb2.AUDIO_ENCODING_PCM,
    "flac": audio_pb2.AUDIO_ENCODING_FLAC,
    "mp3": audio_pb2.AUDIO_ENCODING_MP3,
    "opus": audio_pb2.AUDIO_ENCODING_OPUS,
    "aac": audio_pb2.AUDIO_ENCODING_AAC,
    "ulaw": audio_pb2.AUDIO_ENCODING_MULAW,
    "alaw": audio_pb2.AUDIO_ENCODING_ALAW,
}
"""Format name (as in HTTP's response_format) to proto encoding."""
GRANULARITIES = {
    "auto": synthesizer_pb2.SPLIT_GRANULARITY_AUTO,
    "sentence": synthesizer_pb2.SPLIT_GRANULARITY_SENTENCE,
    "clause": synthesizer_pb2.SPLIT_GRANULARITY_CLAUSE,
    "none": synthesizer_pb2.SPLIT_GRANULARITY_NONE,
}
"""Split granularity name (as in the WebSocket's split_granularity and the CLI) to proto value."""


def format_for_path(path: str, default: str = "wav") -> str:
    """The format a file name's extension asks for ("out.mp3" -> "mp3"), else `default`."""
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    return suffix if suffix in FORMATS else default


def session_config(
    *,
    model: str = "",
    voice: str = "",
    format: str = "wav",
    stream: bool = True,
    sample_rate: int | None = None,
    speed: float | None = None,
    language: str | None = None,
    instructions: str | None = None,
    seed: int | None = None,
    extra_params: dict[str, Any] | None = None,
    word_timestamps: bool = False,
    request_id: str = "",
) -> synthesizer_pb2.SessionConfig:
    """A SessionConfig; unset optional fields stay unset, so the model's defaults apply.

    `stream=True` asks for audio as it is made; False for one complete file (exact
    sizes in its header) when the session ends.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {', '.join(sorted(FORMATS))}")
    config = synthesizer_pb2.SessionConfig(
        model=model,
        voice=voice,
        encoding=FORMATS[format],
        delivery=synthesizer_pb2.AUDIO_DELIVERY_STREAM if stream else synthesizer_pb2.AUDIO_DELIVERY_FILE,
        word_timestamps=word_timestamps,
        request_id=request_id,
    )
    for name, value in (
        ("sample_rate", sample_rate),
        ("speed", speed),
        ("language", language),
        ("instructions", instructions),
        ("seed", seed),
    ):
        if value is not None:
            setattr(config, name, value)
    if extra_params:
        config.extra_params.update(extra_params)
    return config


def voice_request(
    name: str,
    audio: bytes | str | Path,
    *,
    ref_text: str = "",
    consent: str = "",
    description: str = "",
    mime_type: str = "",
) -> voices_pb2.CreateVoiceRequest:
    """A CreateVoice request from a reference clip given as bytes or as a file path."""
    if not isinstance(audio, bytes):
        path = Path(audio)
        mime_type = mime_type or mimetypes.guess_type(path.name)[0] or ""
        audio = path.read_bytes()
    return voices_pb2.CreateVoiceRequest(
        name=name, audio=audio, mime_type=mime_type, ref_text=ref_text, consent=consent, speaker_description=description
    )
