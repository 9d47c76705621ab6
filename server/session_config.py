"""From a SessionConfig message to validated, transport-free request parameters.

Checks here apply to every model: ranges, encodings, and the rule that a field the
loaded model does not honour is refused by name rather than silently ignored.
Model-specific checks belong to the model's adapter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from google.protobuf import struct_pb2

from vocalis.server.audio_encoding import Encoding, StreamEncoder, encodable_rate
from vocalis.server.config import Limits
from vocalis.server.errors import from_request_error, invalid_argument
from vocalis.server.voice_resolver import ResolvedVoice
from vocalis.stages.api.errors import RequestError
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.text.sentence_splitter import DEFAULT_IDLE_FLUSH_S, DEFAULT_MAX_UNIT_CHARS, Granularity, SentenceSplitter
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2

ENCODINGS = {
    audio_pb2.AUDIO_ENCODING_UNSPECIFIED: Encoding.WAV,
    audio_pb2.AUDIO_ENCODING_PCM: Encoding.PCM,
    audio_pb2.AUDIO_ENCODING_WAV: Encoding.WAV,
    audio_pb2.AUDIO_ENCODING_FLAC: Encoding.FLAC,
    audio_pb2.AUDIO_ENCODING_MP3: Encoding.MP3,
    audio_pb2.AUDIO_ENCODING_OPUS: Encoding.OPUS,
    audio_pb2.AUDIO_ENCODING_AAC: Encoding.AAC,
    audio_pb2.AUDIO_ENCODING_MULAW: Encoding.MULAW,
    audio_pb2.AUDIO_ENCODING_ALAW: Encoding.ALAW,
}
PROTO_ENCODINGS = {encoding: value for value, encoding in ENCODINGS.items() if value}

# Handled by the server for every model, whatever the model says it accepts. `speed` is the model's own
# where it accepts it (Piper's length scale), else the encoder's time-stretch.
UNIVERSAL_FIELDS = frozenset({"model", "voice", "encoding", "sample_rate", "request_id", "delivery", "text_splitting", "speed"})

GRANULARITIES = {
    synthesizer_pb2.SPLIT_GRANULARITY_UNSPECIFIED: Granularity.AUTO,
    synthesizer_pb2.SPLIT_GRANULARITY_AUTO: Granularity.AUTO,
    synthesizer_pb2.SPLIT_GRANULARITY_SENTENCE: Granularity.SENTENCE,
    synthesizer_pb2.SPLIT_GRANULARITY_CLAUSE: Granularity.CLAUSE,
    synthesizer_pb2.SPLIT_GRANULARITY_NONE: Granularity.NONE,
}
MAX_PARAMS_DEPTH = 8
"""Deepest nesting of objects and lists in extra_params (no model needs more than 2)."""
MIN_UNIT_CHARS = 20
MAX_IDLE_FLUSH_MS = 600_000


def text_splitter(config: synthesizer_pb2.SessionConfig, whole_input: bool = False) -> SentenceSplitter:
    """The session's splitter from `config.text_splitting`; INVALID_ARGUMENT naming the field at fault.

    `whole_input` (a model whose text is one instruction): granularity AUTO means NONE."""
    splitting = config.text_splitting
    if splitting.granularity not in GRANULARITIES:
        raise invalid_argument(
            "text_splitting.granularity", "INVALID_VALUE", f"unknown split granularity {splitting.granularity}"
        )
    max_unit_chars = splitting.max_unit_chars if splitting.HasField("max_unit_chars") else DEFAULT_MAX_UNIT_CHARS
    if max_unit_chars < MIN_UNIT_CHARS:
        raise invalid_argument(
            "text_splitting.max_unit_chars",
            "OUT_OF_RANGE",
            f"text_splitting.max_unit_chars must be at least {MIN_UNIT_CHARS}, got {max_unit_chars}",
        )
    idle_flush_ms = splitting.idle_flush_ms if splitting.HasField("idle_flush_ms") else round(DEFAULT_IDLE_FLUSH_S * 1000)
    if not 0 <= idle_flush_ms <= MAX_IDLE_FLUSH_MS:
        raise invalid_argument(
            "text_splitting.idle_flush_ms",
            "OUT_OF_RANGE",
            f"text_splitting.idle_flush_ms must be from 0 (off) to {MAX_IDLE_FLUSH_MS}, got {idle_flush_ms}",
        )
    granularity = GRANULARITIES[splitting.granularity]
    if whole_input and granularity is Granularity.AUTO:
        granularity = Granularity.NONE
    return SentenceSplitter(granularity, max_unit_chars, idle_flush_ms / 1000 or None)


@dataclass(frozen=True)
class SessionSettings:
    """A session's config after validation against its model, before its voice is known."""

    model: LoadedModel
    encoding: Encoding
    requested_rate: int | None
    """The sample_rate the caller asked for (None: the model's); it is known to be encodable."""
    stream: bool
    """Whether the audio may stream (any delivery but AUDIO_DELIVERY_FILE)."""
    params: dict[str, Any]
    """The model's own fields, by proto name, as plain values."""
    speed: float = 1.0
    """The encoder's time-stretch: the requested speed for a model without its own speed, else 1."""
    streamed: bool = True
    """Whether the caller hears units as they come (no file delivery): a model may level each unit alone."""
    aligned_words: bool = False
    """Word timestamps asked for, from the model's forced aligner (the model itself never sees the field)."""

    @property
    def word_timestamps(self) -> bool:
        """Whether the caller asked for word times (from the model itself or from the forced aligner)."""
        return self.aligned_words or bool(self.params.get("word_timestamps"))

    @property
    def sample_rate(self) -> int:
        """The output rate, after the codec's rules (Opus rates)."""
        return encodable_rate(self.encoding, self.model.capabilities.sample_rate, self.requested_rate)

    def new_encoder(self, *, stream: bool | None = None) -> StreamEncoder:
        """A fresh encoder for this session's audio (`stream=False`: one whole file)."""
        return StreamEncoder(
            self.encoding, self.model.capabilities.sample_rate, self.requested_rate, stream=self.stream if stream is None else stream,
            speed=self.speed,
        )


@dataclass(frozen=True)
class ResolvedSession:
    """A session's settings, its voice, and the model's input for each of its units."""

    settings: SessionSettings
    voice: str
    """The voice SessionStarted reports."""
    stage_input: Any
    warnings: tuple[synthesizer_pb2.Warning, ...] = ()
    """What the field policy accepted but the caller should hear of (server/field_policy.py)."""

    @property
    def model(self) -> LoadedModel:
        return self.settings.model

    @property
    def encoding(self) -> Encoding:
        return self.settings.encoding


def set_fields(config: synthesizer_pb2.SessionConfig) -> dict[str, Any]:
    """The fields the caller set, by proto name, as plain Python values; INVALID_ARGUMENT for extra_params that JSON cannot hold."""
    values: dict[str, Any] = {}
    for descriptor, value in config.ListFields():
        if descriptor.name == "extra_params":
            values[descriptor.name] = plain_struct(value, "extra_params", 1)
        elif descriptor.is_repeated:
            values[descriptor.name] = list(value)
        else:
            values[descriptor.name] = value
    return values


def enum_name(descriptor: Any, number: int) -> str | None:
    """A proto enum value as adapters see it: its name without the enum's prefix, lower case
    (TASK_TYPE_VOICE_DESIGN -> "voice_design"); None for a number the enum does not define."""
    value = descriptor.enum_type.values_by_number.get(number)
    if value is None:
        return None
    prefix = "".join(f"_{c}" if c.isupper() else c.upper() for c in descriptor.enum_type.name).lstrip("_") + "_"
    return value.name.removeprefix(prefix).lower()


def adapter_fields(config: synthesizer_pb2.SessionConfig, fields: dict[str, Any], native_speed: bool = False) -> dict[str, Any]:
    """The set fields an adapter decides on: the universal ones and ref_audio left out (but `speed` kept for a model
    with its own speed), enum numbers as names (so that no proto numbering reaches stages/)."""
    params: dict[str, Any] = {}
    for name, value in fields.items():
        if (name in UNIVERSAL_FIELDS and not (name == "speed" and native_speed)) or name in ("ref_audio", "more_references"):
            continue
        descriptor = config.DESCRIPTOR.fields_by_name[name]
        if descriptor.enum_type is not None:
            value = enum_name(descriptor, value)
            if value is None:
                raise invalid_argument(name, "INVALID_VALUE", f"unknown {name} {fields[name]}")
        params[name] = value
    return params


def plain_struct(struct: struct_pb2.Struct, path: str, depth: int) -> dict[str, Any]:
    """`struct` as a dict of plain values, refusing what JSON cannot say (NaN, infinities) and nesting past MAX_PARAMS_DEPTH."""
    return {key: _plain_value(value, f"{path}.{key}", depth) for key, value in struct.fields.items()}


def _plain_value(value: struct_pb2.Value, path: str, depth: int) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        if not math.isfinite(value.number_value):
            raise invalid_argument(path, "INVALID_VALUE", f"{path} must be a finite number, got {value.number_value}")
        return value.number_value
    if kind in ("struct_value", "list_value"):
        if depth >= MAX_PARAMS_DEPTH:
            raise invalid_argument(path, "TOO_DEEP", f"{path}: extra_params may nest at most {MAX_PARAMS_DEPTH} levels")
        if kind == "struct_value":
            return plain_struct(value.struct_value, path, depth + 1)
        return [_plain_value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value.list_value.values)]
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def validate(config: synthesizer_pb2.SessionConfig, model: LoadedModel, limits: Limits) -> SessionSettings:
    """Check `config` against `model` and `limits`, touching nothing; raises StatusError naming the field at fault."""
    fields = set_fields(config)
    caps = model.capabilities
    unsupported = sorted(set(fields) - UNIVERSAL_FIELDS - caps.accepted_fields)
    if unsupported:
        name = unsupported[0]
        raise invalid_argument(
            name,
            "FIELD_NOT_SUPPORTED",
            f"{name} is not supported by model {model.name}"
            + (f" (also: {', '.join(unsupported[1:])})" if unsupported[1:] else "")
            + f"; it accepts: {', '.join(sorted(caps.accepted_fields)) or 'no optional fields'}",
        )
    missing = sorted(caps.required_fields - set(fields))
    if missing:
        raise invalid_argument(missing[0], "FIELD_REQUIRED", f"{missing[0]} is required by model {model.name}")
    if "speed" in fields and not caps.min_speed <= config.speed <= caps.max_speed:
        raise invalid_argument(
            "speed", "OUT_OF_RANGE", f"speed must be from {caps.min_speed} to {caps.max_speed}, got {config.speed:g}"
        )
    if config.encoding not in ENCODINGS:
        raise invalid_argument("encoding", "INVALID_VALUE", f"unknown encoding {config.encoding}")
    encoding = ENCODINGS[config.encoding]
    requested = config.sample_rate if config.HasField("sample_rate") else None
    if requested is not None and not limits.min_sample_rate <= requested <= limits.max_sample_rate:
        raise invalid_argument(
            "sample_rate",
            "OUT_OF_RANGE",
            f"sample_rate must be from {limits.min_sample_rate} to {limits.max_sample_rate} Hz, got {requested}",
        )
    native_speed = "speed" in caps.accepted_fields
    stretch = config.speed if "speed" in fields and not native_speed else 1.0
    try:
        encodable_rate(encoding, caps.sample_rate, requested)
    except ValueError as error:
        raise invalid_argument("sample_rate", "UNSUPPORTED_SAMPLE_RATE", f"sample_rate: {error}") from error
    params = adapter_fields(config, fields, native_speed)
    aligned_words = model.aligner is not None and bool(params.pop("word_timestamps", False))
    return SessionSettings(
        model=model,
        encoding=encoding,
        requested_rate=requested,
        stream=config.delivery != synthesizer_pb2.AUDIO_DELIVERY_FILE,
        params=params,
        aligned_words=aligned_words,
        speed=stretch,
        streamed=config.delivery not in (synthesizer_pb2.AUDIO_DELIVERY_FILE, synthesizer_pb2.AUDIO_DELIVERY_FILE_PER_UTTERANCE),
    )


def resolve(settings: SessionSettings, voice: ResolvedVoice) -> ResolvedSession:
    """The session for validated `settings` spoken with `voice`: the model's adapter builds its input."""
    model = settings.model
    params = RequestParams(model=model.name, voice=voice.preset, fields=settings.params, reference=voice.reference, streamed=settings.streamed,
                           more_references=list(voice.more_references))
    try:
        stage_input = model.adapter.stage_input(params)
    except RequestError as error:
        raise from_request_error(error) from error
    warnings = tuple(synthesizer_pb2.Warning(code=code, message=message, field=name) for name, code, message in params.warnings)
    return ResolvedSession(settings=settings, voice=voice.name, stage_input=stage_input, warnings=warnings)
