from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VoiceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VOICE_KIND_UNSPECIFIED: _ClassVar[VoiceKind]
    VOICE_KIND_PRESET: _ClassVar[VoiceKind]
    VOICE_KIND_PRECOMPUTED: _ClassVar[VoiceKind]
    VOICE_KIND_UPLOADED: _ClassVar[VoiceKind]
VOICE_KIND_UNSPECIFIED: VoiceKind
VOICE_KIND_PRESET: VoiceKind
VOICE_KIND_PRECOMPUTED: VoiceKind
VOICE_KIND_UPLOADED: VoiceKind

class Voice(_message.Message):
    __slots__ = ("name", "kind", "models", "has_ref_text", "created_at", "description", "language", "duration_seconds", "embedding_dim")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    HAS_REF_TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_DIM_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: VoiceKind
    models: _containers.RepeatedScalarFieldContainer[str]
    has_ref_text: bool
    created_at: int
    description: str
    language: str
    duration_seconds: float
    embedding_dim: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[VoiceKind, str]] = ..., models: _Optional[_Iterable[str]] = ..., has_ref_text: _Optional[bool] = ..., created_at: _Optional[int] = ..., description: _Optional[str] = ..., language: _Optional[str] = ..., duration_seconds: _Optional[float] = ..., embedding_dim: _Optional[int] = ...) -> None: ...

class ListVoicesRequest(_message.Message):
    __slots__ = ("model", "page_size", "page_token")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    model: str
    page_size: int
    page_token: str
    def __init__(self, model: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListVoicesResponse(_message.Message):
    __slots__ = ("voices", "next_page_token")
    VOICES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    voices: _containers.RepeatedCompositeFieldContainer[Voice]
    next_page_token: str
    def __init__(self, voices: _Optional[_Iterable[_Union[Voice, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetVoiceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetVoiceResponse(_message.Message):
    __slots__ = ("voice",)
    VOICE_FIELD_NUMBER: _ClassVar[int]
    voice: Voice
    def __init__(self, voice: _Optional[_Union[Voice, _Mapping]] = ...) -> None: ...

class CreateVoiceRequest(_message.Message):
    __slots__ = ("name", "audio", "mime_type", "ref_text", "consent", "speaker_description", "speaker_embedding")
    NAME_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    REF_TEXT_FIELD_NUMBER: _ClassVar[int]
    CONSENT_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    name: str
    audio: bytes
    mime_type: str
    ref_text: str
    consent: str
    speaker_description: str
    speaker_embedding: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, name: _Optional[str] = ..., audio: _Optional[bytes] = ..., mime_type: _Optional[str] = ..., ref_text: _Optional[str] = ..., consent: _Optional[str] = ..., speaker_description: _Optional[str] = ..., speaker_embedding: _Optional[_Iterable[float]] = ...) -> None: ...

class CreateVoiceResponse(_message.Message):
    __slots__ = ("voice",)
    VOICE_FIELD_NUMBER: _ClassVar[int]
    voice: Voice
    def __init__(self, voice: _Optional[_Union[Voice, _Mapping]] = ...) -> None: ...

class DeleteVoiceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteVoiceResponse(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...
