"""HTTP speech request to gRPC SessionConfig: field for field, nothing decided here."""

from __future__ import annotations

from google.protobuf import struct_pb2

from vocalis.clients.messages import FORMATS
from vocalis.gateway.schemas import SpeechRequest
from vocalis.tts.v1 import synthesizer_pb2

TASK_TYPES = {
    "CustomVoice": synthesizer_pb2.TASK_TYPE_CUSTOM_VOICE,
    "VoiceDesign": synthesizer_pb2.TASK_TYPE_VOICE_DESIGN,
    "Base": synthesizer_pb2.TASK_TYPE_BASE,
}
# Fields copied as they are when the caller set them.
_OPTIONAL_SCALARS = (
    "sample_rate",
    "speed",
    "language",
    "instructions",
    "ref_audio",
    "ref_text",
    "x_vector_only_mode",
    "seed",
    "max_new_tokens",
    "initial_codec_chunk_frames",
    "duration_seconds",
)


def session_config(body: SpeechRequest, request_id: str) -> synthesizer_pb2.SessionConfig:
    config = synthesizer_pb2.SessionConfig(
        model=body.model or "",
        voice=body.voice_name,
        encoding=FORMATS[body.response_format],
        word_timestamps=body.word_timestamps,
        request_id=request_id,
        delivery=synthesizer_pb2.AUDIO_DELIVERY_STREAM if body.stream_delivery else synthesizer_pb2.AUDIO_DELIVERY_FILE,
    )
    for name in _OPTIONAL_SCALARS:
        value = getattr(body, name)
        if value is not None:
            setattr(config, name, value)
    if body.task_type is not None:
        config.task_type = TASK_TYPES[body.task_type]
    for reference in body.more_references:
        config.more_references.add(audio=reference.audio_path, text=reference.text or "")
    if body.speaker_embedding is not None:
        config.speaker_embedding.extend(body.speaker_embedding)
    config.unknown_fields.extend(body.unknown_fields)
    if body.extra_params is not None:
        extra = struct_pb2.Struct()
        extra.update(body.extra_params)
        config.extra_params.CopyFrom(extra)
    return config
