from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class AudioEncoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUDIO_ENCODING_UNSPECIFIED: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_PCM: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_WAV: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_FLAC: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_MP3: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_OPUS: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_AAC: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_MULAW: _ClassVar[AudioEncoding]
    AUDIO_ENCODING_ALAW: _ClassVar[AudioEncoding]
AUDIO_ENCODING_UNSPECIFIED: AudioEncoding
AUDIO_ENCODING_PCM: AudioEncoding
AUDIO_ENCODING_WAV: AudioEncoding
AUDIO_ENCODING_FLAC: AudioEncoding
AUDIO_ENCODING_MP3: AudioEncoding
AUDIO_ENCODING_OPUS: AudioEncoding
AUDIO_ENCODING_AAC: AudioEncoding
AUDIO_ENCODING_MULAW: AudioEncoding
AUDIO_ENCODING_ALAW: AudioEncoding
