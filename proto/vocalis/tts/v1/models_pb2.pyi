from vocalis.tts.v1 import audio_pb2 as _audio_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelLimits(_message.Message):
    __slots__ = ("max_input_chars", "min_speed", "max_speed")
    MAX_INPUT_CHARS_FIELD_NUMBER: _ClassVar[int]
    MIN_SPEED_FIELD_NUMBER: _ClassVar[int]
    MAX_SPEED_FIELD_NUMBER: _ClassVar[int]
    max_input_chars: int
    min_speed: float
    max_speed: float
    def __init__(self, max_input_chars: _Optional[int] = ..., min_speed: _Optional[float] = ..., max_speed: _Optional[float] = ...) -> None: ...

class ModelCapabilities(_message.Message):
    __slots__ = ("sample_rate", "encodings", "voices", "default_voice", "accepted_fields", "required_fields", "rejected_fields", "extra_params", "streaming", "voice_cloning", "languages", "limits", "ignored_fields", "extra_param_specs")
    SAMPLE_RATE_FIELD_NUMBER: _ClassVar[int]
    ENCODINGS_FIELD_NUMBER: _ClassVar[int]
    VOICES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_VOICE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_PARAMS_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    VOICE_CLONING_FIELD_NUMBER: _ClassVar[int]
    LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    IGNORED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_PARAM_SPECS_FIELD_NUMBER: _ClassVar[int]
    sample_rate: int
    encodings: _containers.RepeatedScalarFieldContainer[_audio_pb2.AudioEncoding]
    voices: _containers.RepeatedScalarFieldContainer[str]
    default_voice: str
    accepted_fields: _containers.RepeatedScalarFieldContainer[str]
    required_fields: _containers.RepeatedScalarFieldContainer[str]
    rejected_fields: _containers.RepeatedScalarFieldContainer[str]
    extra_params: _containers.RepeatedScalarFieldContainer[str]
    streaming: bool
    voice_cloning: bool
    languages: _containers.RepeatedScalarFieldContainer[str]
    limits: ModelLimits
    ignored_fields: _containers.RepeatedScalarFieldContainer[str]
    extra_param_specs: _containers.RepeatedCompositeFieldContainer[ExtraParam]
    def __init__(self, sample_rate: _Optional[int] = ..., encodings: _Optional[_Iterable[_Union[_audio_pb2.AudioEncoding, str]]] = ..., voices: _Optional[_Iterable[str]] = ..., default_voice: _Optional[str] = ..., accepted_fields: _Optional[_Iterable[str]] = ..., required_fields: _Optional[_Iterable[str]] = ..., rejected_fields: _Optional[_Iterable[str]] = ..., extra_params: _Optional[_Iterable[str]] = ..., streaming: _Optional[bool] = ..., voice_cloning: _Optional[bool] = ..., languages: _Optional[_Iterable[str]] = ..., limits: _Optional[_Union[ModelLimits, _Mapping]] = ..., ignored_fields: _Optional[_Iterable[str]] = ..., extra_param_specs: _Optional[_Iterable[_Union[ExtraParam, _Mapping]]] = ...) -> None: ...

class ExtraParam(_message.Message):
    __slots__ = ("name", "description", "type", "minimum", "exclusive_minimum", "maximum", "choices")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_MINIMUM_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    type: str
    minimum: float
    exclusive_minimum: bool
    maximum: float
    choices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., type: _Optional[str] = ..., minimum: _Optional[float] = ..., exclusive_minimum: _Optional[bool] = ..., maximum: _Optional[float] = ..., choices: _Optional[_Iterable[str]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("name", "family", "is_default", "capabilities", "aliases")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    name: str
    family: str
    is_default: bool
    capabilities: ModelCapabilities
    aliases: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., family: _Optional[str] = ..., is_default: _Optional[bool] = ..., capabilities: _Optional[_Union[ModelCapabilities, _Mapping]] = ..., aliases: _Optional[_Iterable[str]] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[Model]
    def __init__(self, models: _Optional[_Iterable[_Union[Model, _Mapping]]] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: Model
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ...) -> None: ...
