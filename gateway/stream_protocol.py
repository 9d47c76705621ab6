"""The WS /v1/audio/speech/stream protocol: its messages, its session.config, its error frames and close codes.

Words, because the socket and gRPC use the same ones for different things:

- **sentence** (socket): one unit of text the server cut and synthesized; its audio is framed by
  `audio.start` / `audio.done`. It is what gRPC calls an *utterance* (`UtteranceDone`, `utterance_index`).
- **utterance** (socket): all the text between two `input.done`s, counted by the gateway
  (`utterance_index` in socket frames); gRPC has no name for it.
- **session** (socket): `session.done` ends a socket *utterance*, not the socket; the socket lives on until
  `session.close`. gRPC's `SessionDone` ends the whole call, which `StreamSession` maps to a normal close.
- `stages.UtteranceStage` uses "utterance" in a fourth sense, a model that takes a whole text; it does not show here.

The messages are vLLM-Omni's, plus flush and clear. Client to server, JSON text frames:

- `session.config`: the fields of POST /v1/audio/speech (less `input`, `stream`, `stream_format`) and
  `stream_audio`, `split_granularity` (auto | sentence | clause | none), `max_unit_chars`, `idle_flush_ms`.
  First, and again between utterances (it replaces the whole config).
- `input.text {text}`: appended verbatim; each complete sentence is synthesized at once.
- `input.flush {flush_id}`: synthesize what is buffered now; answered by `flush.done {flush_id}`.
- `input.commit {flush_id}` (SGLang-Omni's name): the same, answered by `input.committed {flush_id,
  segment_index, total_sentences}` once the audio of the text before it has been sent.
- `input.clear`: drop buffered text and audio not yet sent (barge-in); answered by `input.cleared`.
- `input.done`: the utterance is complete: synthesize the rest; answered by `session.done`.
- `session.close`: speak what was sent, then close (1000). After `input.done` the socket stays open for
  the next utterance, as in vLLM-Omni (SGLang-Omni closes it; its clients send `session.close` anyway).

Server to client, for every unit of text: `audio.start` (utterance and sentence index, the
sentence, the real `format` and `sample_rate`), the audio as binary frames (with
`stream_audio`, raw chunks as they are made: PCM16, or G.711 bytes for `ulaw`/`alaw`; otherwise one complete file in
`response_format`), then `audio.done`. Besides: `session.configured {session_id, model, response_format, sample_rate}`
after every accepted session.config (SGLang-Omni's acknowledgement; vLLM-Omni clients skip it),
`warning {code, message, param}` for fields accepted but ignored (server/field_policy.py; unknown
keys such as vLLM-Omni's newer `streaming_mode` included), `session.done`, `flush.done`, `input.committed`,
`input.cleared`, and `error {message, code, reason, param}` (with `partial_audio` and
`action: "discard"` when audio of the failed sentence was already sent).

Word times (`word_timestamps: true`), each word `{word, start_ms, end_ms, start_char, end_char}` with
character offsets into all the text sent since the session.config: in vLLM-Omni's shape
(`word_timestamps_format: "peer"`, the default with `stream_audio`) the PCM comes as JSON `audio.chunk`
frames `{utterance_index, sentence_index, chunk_id, chunk_start_ms, chunk_end_ms, sample_rate, audio_b64,
timestamps: null}` and each sentence ends with one more `audio.chunk` with no audio and its words in
`timestamps`, times from the sentence's start; incrementally (`"incremental"`, the default without
`stream_audio`) the audio is framed as usual and `audio.timestamps {utterance_index, sentence_index, words}`
frames follow the audio of their words, times from the start of the session's audio.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

import grpc
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vocalis.clients.errors import VocalisError
from vocalis.clients.messages import GRANULARITIES
from vocalis.gateway.errors import http_status, ws_field
from vocalis.gateway.schemas import RAW_STREAM_FORMATS, SpeechRequest
from vocalis.gateway.translate import session_config
from vocalis.tts.v1 import synthesizer_pb2 as pb

PATH = "/v1/audio/speech/stream"

# Close codes (RFC 6455).
NORMAL, UNSUPPORTED_DATA, INVALID_PAYLOAD, POLICY, TOO_BIG, INTERNAL, TRY_AGAIN_LATER = 1000, 1003, 1007, 1008, 1009, 1011, 1013


class StreamOptions(BaseModel):
    """The session.config fields that only the socket has; the rest are POST /v1/audio/speech's."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["session.config"]
    stream_audio: bool = Field(default=False, description="Raw chunks as they are made (needs response_format pcm, ulaw or alaw).")
    split_granularity: Literal["auto", "sentence", "clause", "none"] = Field(default="auto", description="Where text is cut into units.")
    max_unit_chars: int | None = Field(default=None, ge=1, le=2**31 - 1, description="Longest unit, in characters.")
    idle_flush_ms: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1, description="Flush buffered text after this long without text; 0: never.")
    word_timestamps_format: Literal["peer", "incremental"] | None = Field(
        default=None,
        description="With word_timestamps: peer (vLLM-Omni's audio.chunk JSON frames, the times in a trailing frame per "
        "sentence; needs stream_audio) or incremental (audio as usual, audio.timestamps frames as words are spoken). "
        "Default: peer with stream_audio, else incremental.",
    )


OWN_FIELDS = frozenset(StreamOptions.model_fields)
NOT_ON_THE_SOCKET = frozenset({"input", "stream", "stream_format"})


class ConfigError(Exception):
    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class StreamConfig:
    """A session.config, translated."""

    session: pb.SessionConfig
    response_format: str
    stream_audio: bool
    word_timestamps: str | None = None
    """How word times are framed: "peer", "incremental", or None when not asked for."""


def parse_config(message: dict[str, Any]) -> StreamConfig:
    """session.config to a SessionConfig, field for field (the speech fields through SpeechRequest); raises ConfigError."""
    unknown = sorted(set(message) & NOT_ON_THE_SOCKET)
    if unknown:
        raise ConfigError(f"unknown field {unknown[0]!r} (text goes in input.text messages)", unknown[0])
    try:
        options = StreamOptions.model_validate({k: v for k, v in message.items() if k in OWN_FIELDS})
        body = SpeechRequest.model_validate({**{k: v for k, v in message.items() if k not in OWN_FIELDS}, "input": ""})
    except ValidationError as error:
        raise ConfigError(*_validation_message(error)) from None
    if options.stream_audio and body.response_format not in RAW_STREAM_FORMATS:
        raise ConfigError(f"stream_audio requires a raw response_format: {', '.join(RAW_STREAM_FORMATS)}", "stream_audio")
    timestamps = None
    if body.word_timestamps:
        timestamps = options.word_timestamps_format or ("peer" if options.stream_audio else "incremental")
        if timestamps == "peer" and not options.stream_audio:
            raise ConfigError("word_timestamps_format peer requires stream_audio (and response_format pcm)", "word_timestamps_format")
    config = session_config(body, f"ws-{uuid.uuid4().hex}")
    config.delivery = pb.AUDIO_DELIVERY_STREAM if options.stream_audio else pb.AUDIO_DELIVERY_FILE_PER_UTTERANCE
    splitting = config.text_splitting
    splitting.granularity = GRANULARITIES[options.split_granularity]
    if options.max_unit_chars is not None:
        splitting.max_unit_chars = options.max_unit_chars
    if options.idle_flush_ms is not None:
        splitting.idle_flush_ms = options.idle_flush_ms
    return StreamConfig(config, body.response_format, options.stream_audio, timestamps)


def _validation_message(error: ValidationError) -> tuple[str, str | None]:
    first = error.errors()[0]
    param = ".".join(str(part) for part in first.get("loc", ())) or None
    if first.get("type") == "extra_forbidden":
        return f"unknown field {param!r}", param
    return (f"{param}: {first['msg']}" if param else first["msg"]), param


def valid_unicode(text: str) -> bool:
    """False for text with a lone surrogate (JSON escapes allow one; gRPC's UTF-8 cannot carry it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def error_frame(message: str, code: int, reason: str, param: str | None = None) -> dict[str, Any]:
    return {"type": "error", "message": message, "code": code, "reason": reason, "param": param}


def upstream_error_frame(error: VocalisError) -> dict[str, Any]:
    param = ws_field(error.field)
    return error_frame(error.message, http_status(error), error.reason or error.code.name, param)


def close_code(error: VocalisError) -> int:
    if http_status(error) == 413:
        return TOO_BIG
    if error.code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
        return TRY_AGAIN_LATER
    return POLICY if http_status(error) < 500 else INTERNAL
