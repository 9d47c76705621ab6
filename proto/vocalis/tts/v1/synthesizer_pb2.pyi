from google.protobuf import struct_pb2 as _struct_pb2
from vocalis.tts.v1 import audio_pb2 as _audio_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_TYPE_UNSPECIFIED: _ClassVar[TaskType]
    TASK_TYPE_CUSTOM_VOICE: _ClassVar[TaskType]
    TASK_TYPE_VOICE_DESIGN: _ClassVar[TaskType]
    TASK_TYPE_BASE: _ClassVar[TaskType]

class AudioDelivery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUDIO_DELIVERY_UNSPECIFIED: _ClassVar[AudioDelivery]
    AUDIO_DELIVERY_STREAM: _ClassVar[AudioDelivery]
    AUDIO_DELIVERY_FILE: _ClassVar[AudioDelivery]
    AUDIO_DELIVERY_FILE_PER_UTTERANCE: _ClassVar[AudioDelivery]

class SplitGranularity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPLIT_GRANULARITY_UNSPECIFIED: _ClassVar[SplitGranularity]
    SPLIT_GRANULARITY_SENTENCE: _ClassVar[SplitGranularity]
    SPLIT_GRANULARITY_CLAUSE: _ClassVar[SplitGranularity]
    SPLIT_GRANULARITY_NONE: _ClassVar[SplitGranularity]
    SPLIT_GRANULARITY_AUTO: _ClassVar[SplitGranularity]
TASK_TYPE_UNSPECIFIED: TaskType
TASK_TYPE_CUSTOM_VOICE: TaskType
TASK_TYPE_VOICE_DESIGN: TaskType
TASK_TYPE_BASE: TaskType
AUDIO_DELIVERY_UNSPECIFIED: AudioDelivery
AUDIO_DELIVERY_STREAM: AudioDelivery
AUDIO_DELIVERY_FILE: AudioDelivery
AUDIO_DELIVERY_FILE_PER_UTTERANCE: AudioDelivery
SPLIT_GRANULARITY_UNSPECIFIED: SplitGranularity
SPLIT_GRANULARITY_SENTENCE: SplitGranularity
SPLIT_GRANULARITY_CLAUSE: SplitGranularity
SPLIT_GRANULARITY_NONE: SplitGranularity
SPLIT_GRANULARITY_AUTO: SplitGranularity

class SynthesizeRequest(_message.Message):
    __slots__ = ("config", "text", "flush", "clear")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FLUSH_FIELD_NUMBER: _ClassVar[int]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    config: SessionConfig
    text: TextInput
    flush: Flush
    clear: Clear
    def __init__(self, config: _Optional[_Union[SessionConfig, _Mapping]] = ..., text: _Optional[_Union[TextInput, _Mapping]] = ..., flush: _Optional[_Union[Flush, _Mapping]] = ..., clear: _Optional[_Union[Clear, _Mapping]] = ...) -> None: ...

class SessionConfig(_message.Message):
    __slots__ = ("model", "voice", "encoding", "sample_rate", "speed", "language", "instructions", "task_type", "ref_audio", "ref_text", "x_vector_only_mode", "speaker_embedding", "seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params", "word_timestamps", "request_id", "delivery", "text_splitting", "duration_seconds", "more_references", "unknown_fields")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VOICE_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_RATE_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    REF_AUDIO_FIELD_NUMBER: _ClassVar[int]
    REF_TEXT_FIELD_NUMBER: _ClassVar[int]
    X_VECTOR_ONLY_MODE_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_CODEC_CHUNK_FRAMES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_PARAMS_FIELD_NUMBER: _ClassVar[int]
    WORD_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    TEXT_SPLITTING_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MORE_REFERENCES_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_FIELDS_FIELD_NUMBER: _ClassVar[int]
    model: str
    voice: str
    encoding: _audio_pb2.AudioEncoding
    sample_rate: int
    speed: float
    language: str
    instructions: str
    task_type: TaskType
    ref_audio: str
    ref_text: str
    x_vector_only_mode: bool
    speaker_embedding: _containers.RepeatedScalarFieldContainer[float]
    seed: int
    max_new_tokens: int
    initial_codec_chunk_frames: int
    extra_params: _struct_pb2.Struct
    word_timestamps: bool
    request_id: str
    delivery: AudioDelivery
    text_splitting: TextSplitting
    duration_seconds: float
    more_references: _containers.RepeatedCompositeFieldContainer[ReferenceClip]
    unknown_fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, model: _Optional[str] = ..., voice: _Optional[str] = ..., encoding: _Optional[_Union[_audio_pb2.AudioEncoding, str]] = ..., sample_rate: _Optional[int] = ..., speed: _Optional[float] = ..., language: _Optional[str] = ..., instructions: _Optional[str] = ..., task_type: _Optional[_Union[TaskType, str]] = ..., ref_audio: _Optional[str] = ..., ref_text: _Optional[str] = ..., x_vector_only_mode: _Optional[bool] = ..., speaker_embedding: _Optional[_Iterable[float]] = ..., seed: _Optional[int] = ..., max_new_tokens: _Optional[int] = ..., initial_codec_chunk_frames: _Optional[int] = ..., extra_params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., word_timestamps: _Optional[bool] = ..., request_id: _Optional[str] = ..., delivery: _Optional[_Union[AudioDelivery, str]] = ..., text_splitting: _Optional[_Union[TextSplitting, _Mapping]] = ..., duration_seconds: _Optional[float] = ..., more_references: _Optional[_Iterable[_Union[ReferenceClip, _Mapping]]] = ..., unknown_fields: _Optional[_Iterable[str]] = ...) -> None: ...

class ReferenceClip(_message.Message):
    __slots__ = ("audio", "text")
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    audio: str
    text: str
    def __init__(self, audio: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class TextSplitting(_message.Message):
    __slots__ = ("granularity", "max_unit_chars", "idle_flush_ms")
    GRANULARITY_FIELD_NUMBER: _ClassVar[int]
    MAX_UNIT_CHARS_FIELD_NUMBER: _ClassVar[int]
    IDLE_FLUSH_MS_FIELD_NUMBER: _ClassVar[int]
    granularity: SplitGranularity
    max_unit_chars: int
    idle_flush_ms: int
    def __init__(self, granularity: _Optional[_Union[SplitGranularity, str]] = ..., max_unit_chars: _Optional[int] = ..., idle_flush_ms: _Optional[int] = ...) -> None: ...

class TextInput(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class Flush(_message.Message):
    __slots__ = ("flush_id",)
    FLUSH_ID_FIELD_NUMBER: _ClassVar[int]
    flush_id: str
    def __init__(self, flush_id: _Optional[str] = ...) -> None: ...

class Clear(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SynthesizeResponse(_message.Message):
    __slots__ = ("session_started", "audio", "word_timings", "flush_done", "cleared", "warning", "utterance_done", "session_done")
    SESSION_STARTED_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    WORD_TIMINGS_FIELD_NUMBER: _ClassVar[int]
    FLUSH_DONE_FIELD_NUMBER: _ClassVar[int]
    CLEARED_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    UTTERANCE_DONE_FIELD_NUMBER: _ClassVar[int]
    SESSION_DONE_FIELD_NUMBER: _ClassVar[int]
    session_started: SessionStarted
    audio: AudioChunk
    word_timings: WordTimings
    flush_done: FlushDone
    cleared: Cleared
    warning: Warning
    utterance_done: UtteranceDone
    session_done: SessionDone
    def __init__(self, session_started: _Optional[_Union[SessionStarted, _Mapping]] = ..., audio: _Optional[_Union[AudioChunk, _Mapping]] = ..., word_timings: _Optional[_Union[WordTimings, _Mapping]] = ..., flush_done: _Optional[_Union[FlushDone, _Mapping]] = ..., cleared: _Optional[_Union[Cleared, _Mapping]] = ..., warning: _Optional[_Union[Warning, _Mapping]] = ..., utterance_done: _Optional[_Union[UtteranceDone, _Mapping]] = ..., session_done: _Optional[_Union[SessionDone, _Mapping]] = ...) -> None: ...

class SessionLimits(_message.Message):
    __slots__ = ("max_buffered_chars", "max_input_chars")
    MAX_BUFFERED_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_INPUT_CHARS_FIELD_NUMBER: _ClassVar[int]
    max_buffered_chars: int
    max_input_chars: int
    def __init__(self, max_buffered_chars: _Optional[int] = ..., max_input_chars: _Optional[int] = ...) -> None: ...

class SessionStarted(_message.Message):
    __slots__ = ("request_id", "model", "voice", "encoding", "sample_rate", "channels", "limits", "media_type")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VOICE_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_RATE_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model: str
    voice: str
    encoding: _audio_pb2.AudioEncoding
    sample_rate: int
    channels: int
    limits: SessionLimits
    media_type: str
    def __init__(self, request_id: _Optional[str] = ..., model: _Optional[str] = ..., voice: _Optional[str] = ..., encoding: _Optional[_Union[_audio_pb2.AudioEncoding, str]] = ..., sample_rate: _Optional[int] = ..., channels: _Optional[int] = ..., limits: _Optional[_Union[SessionLimits, _Mapping]] = ..., media_type: _Optional[str] = ...) -> None: ...

class TextSpan(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class AudioChunk(_message.Message):
    __slots__ = ("audio", "utterance_index", "chunk_index", "sample_offset", "num_samples", "flush_id", "text_span")
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    UTTERANCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    FLUSH_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_SPAN_FIELD_NUMBER: _ClassVar[int]
    audio: bytes
    utterance_index: int
    chunk_index: int
    sample_offset: int
    num_samples: int
    flush_id: str
    text_span: TextSpan
    def __init__(self, audio: _Optional[bytes] = ..., utterance_index: _Optional[int] = ..., chunk_index: _Optional[int] = ..., sample_offset: _Optional[int] = ..., num_samples: _Optional[int] = ..., flush_id: _Optional[str] = ..., text_span: _Optional[_Union[TextSpan, _Mapping]] = ...) -> None: ...

class WordTiming(_message.Message):
    __slots__ = ("word", "start_ms", "end_ms", "text_span")
    WORD_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    TEXT_SPAN_FIELD_NUMBER: _ClassVar[int]
    word: str
    start_ms: int
    end_ms: int
    text_span: TextSpan
    def __init__(self, word: _Optional[str] = ..., start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., text_span: _Optional[_Union[TextSpan, _Mapping]] = ...) -> None: ...

class WordTimings(_message.Message):
    __slots__ = ("utterance_index", "words")
    UTTERANCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    WORDS_FIELD_NUMBER: _ClassVar[int]
    utterance_index: int
    words: _containers.RepeatedCompositeFieldContainer[WordTiming]
    def __init__(self, utterance_index: _Optional[int] = ..., words: _Optional[_Iterable[_Union[WordTiming, _Mapping]]] = ...) -> None: ...

class FlushDone(_message.Message):
    __slots__ = ("flush_id",)
    FLUSH_ID_FIELD_NUMBER: _ClassVar[int]
    flush_id: str
    def __init__(self, flush_id: _Optional[str] = ...) -> None: ...

class Cleared(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Warning(_message.Message):
    __slots__ = ("code", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    field: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class UtteranceDone(_message.Message):
    __slots__ = ("utterance_index", "num_samples", "audio_seconds", "time_to_first_audio_seconds", "real_time_factor", "usage", "text_span", "flush_id")
    UTTERANCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    AUDIO_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_AUDIO_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REAL_TIME_FACTOR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_SPAN_FIELD_NUMBER: _ClassVar[int]
    FLUSH_ID_FIELD_NUMBER: _ClassVar[int]
    utterance_index: int
    num_samples: int
    audio_seconds: float
    time_to_first_audio_seconds: float
    real_time_factor: float
    usage: Usage
    text_span: TextSpan
    flush_id: str
    def __init__(self, utterance_index: _Optional[int] = ..., num_samples: _Optional[int] = ..., audio_seconds: _Optional[float] = ..., time_to_first_audio_seconds: _Optional[float] = ..., real_time_factor: _Optional[float] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., text_span: _Optional[_Union[TextSpan, _Mapping]] = ..., flush_id: _Optional[str] = ...) -> None: ...

class SessionDone(_message.Message):
    __slots__ = ("utterance_count", "num_samples", "audio_seconds", "usage")
    UTTERANCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    AUDIO_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    utterance_count: int
    num_samples: int
    audio_seconds: float
    usage: Usage
    def __init__(self, utterance_count: _Optional[int] = ..., num_samples: _Optional[int] = ..., audio_seconds: _Optional[float] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...
