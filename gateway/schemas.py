"""The HTTP request bodies, as pydantic models: the single schema behind /openapi.json.

Field names and meanings follow the OpenAI speech API and vLLM-Omni's extensions.
Unknown fields pass through to the server by name (SessionConfig.unknown_fields), which
answers them with a warning, or a 400 under --strict-fields (server/field_policy.py).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

ResponseFormat = Literal["wav", "pcm", "flac", "mp3", "opus", "aac", "ulaw", "alaw", "mulaw", "pcm_mulaw", "pcm_alaw", "ulaw_8000", "alaw_8000"]
FORMAT_ALIASES = {"mulaw": "ulaw", "pcm_mulaw": "ulaw", "pcm_alaw": "alaw", "ulaw_8000": "ulaw", "alaw_8000": "alaw"}
"""Other names clients send for G.711: FFmpeg's codec names, and ElevenLabs' `ulaw_8000`/`alaw_8000` (its
`output_format`), which fix the rate at 8000 Hz and are raw bytes even when not streamed (RAW_FORMATS), as
ElevenLabs sends them. A request's response_format is the canonical name once validated."""
RAW_FORMATS = frozenset({"ulaw_8000", "alaw_8000"})
G711_FORMATS = ("ulaw", "alaw")
RAW_STREAM_FORMATS = ("pcm", *G711_FORMATS)
"""Headerless sample formats: what the WebSocket's stream_audio can send chunk by chunk."""
WHOLE_FILE_FORMATS = ("flac", "wav", *G711_FORMATS)
"""Sent as one whole file, with its exact length in its header and a Content-Length, unless a stream is asked for
(`stream_format`, `stream`): a streamed FLAC cannot hold its length (libsndfile then refuses it), a streamed WAV's
header says "unknown length" (0xFFFFFFFF), which Python's `wave` reads as a 27-hour clip, and G.711 as a file is a
WAV of format tag 7 (mu-law) or 6 (A-law) with exact sizes, since a reader cannot tell raw G.711 bytes from any other.
Asked for as a stream, they leave as they are made; every other format leaves as it is made (chunked transfer)
whatever the request says, as OpenAI's speech endpoint does."""
MAX_PARAMS_DEPTH = 8
"""Deepest nesting in extra_params, as the server allows."""

# Ranges that depend on the model are the server's to check (a 400 naming the field), from the model's own
# capabilities, so that HTTP and gRPC answer alike; the descriptions say where a caller can read them.
SPEED = "Playback speed; the model's range is capabilities.limits min_speed to max_speed in GET /v1/models (0.25 to 4.0 for most)."
SPEAKER_EMBEDDING = "Precomputed speaker embedding, as many numbers as the model's embedding size."


def _check_text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (it holds a lone surrogate)") from None
    return value


def _check_json(value: Any, path: str, depth: int) -> None:
    """Refuse what a protobuf Struct cannot carry faithfully: NaN, infinities, lone surrogates, deep nesting."""
    if isinstance(value, str):
        try:
            _check_text(value)
        except ValueError as error:
            raise ValueError(f"{path} {error}") from None
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path} must be a finite number")
    elif isinstance(value, dict | list):
        if depth >= MAX_PARAMS_DEPTH:
            raise ValueError(f"{path}: extra_params may nest at most {MAX_PARAMS_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                _check_json(key, f"{path} key {key!r}", depth)
            _check_json(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]", depth + 1)


class _Body(BaseModel):
    """Unknown fields refused; every string valid Unicode (a lone surrogate cannot go on as UTF-8)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _valid_unicode(cls, value: Any) -> Any:
        return _check_text(value) if isinstance(value, str) else value


class VoiceRef(_Body):
    """A voice given as an object, as newer OpenAI clients send it."""

    id: str = Field(description="Voice name.")


class Reference(_Body):
    """One reference clip in the `references` alias."""

    audio_path: str = Field(min_length=1, description="Reference audio: base64, data: URL, or allowed URL.")
    text: str | None = Field(default=None, description="Transcript of the clip.")


class SpeechRequest(_Body):
    """Body of POST /v1/audio/speech."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    _more_references: list[Reference] = PrivateAttr(default_factory=list)
    """`references` after the first (the first becomes ref_audio/ref_text)."""
    _raw: bool = PrivateAttr(default=False)
    """Raw headerless audio even when not streamed (response_format `ulaw_8000`/`alaw_8000`)."""

    input: str = Field(description="Text to speak.")
    model: str | None = Field(default=None, description="Model name from /v1/models; omitted: the default model.")
    voice: str | VoiceRef | None = Field(default=None, alias="voice", description="Voice name (or {\"id\": name}).")
    speaker: str | None = Field(default=None, description="Alias of voice.")
    instructions: str | None = Field(default=None, description="Style or voice description, for models that take one.")
    response_format: ResponseFormat = Field(default="wav", description="Audio format of the response.")
    sample_rate: int | None = Field(default=None, gt=0, le=2**31 - 1, description="Output sample rate in Hz; omitted: the model's own.")
    speed: float | None = Field(default=None, description=SPEED)
    stream: bool = Field(default=False, description="Stream as server-sent events (unless stream_format says otherwise).")
    stream_format: Literal["sse", "audio"] | None = Field(default=None, description="sse: SSE events; audio: raw bytes.")
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = Field(default=None, description="Qwen3-TTS task.")
    language: str | None = Field(default=None, description="Language of the text.")
    ref_audio: str | None = Field(default=None, description="Reference clip for cloning: base64, data: URL, or URL.")
    ref_text: str | None = Field(default=None, description="Transcript of ref_audio.")
    x_vector_only_mode: bool | None = Field(default=None, description="Clone from the speaker embedding only.")
    speaker_embedding: list[float] | None = Field(default=None, description=SPEAKER_EMBEDDING)
    max_new_tokens: int | None = Field(default=None, ge=1, le=2**31 - 1, description="Cap on generated tokens.")
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1, description="Seed: same seed, same audio.")
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0, le=2**31 - 1, description="First streamed chunk, in codec frames.")
    duration_seconds: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Length of the audio to generate, in seconds, for models told a length (AuK)."
    )
    extra_params: dict[str, Any] | None = Field(default=None, description="Model-specific parameters.")
    word_timestamps: bool = Field(default=False, description="Ask for word timings.")
    references: list[Reference] | None = Field(
        default=None, description="Alias of ref_audio/ref_text: the first element; further ones are more voices to clone, "
        "for models that take several (more_references)."
    )

    @field_validator("extra_params")
    @classmethod
    def _plain_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            _check_json(value, "extra_params", 0)
        return value

    @field_validator("speaker_embedding")
    @classmethod
    def _finite(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and any(v != v or v in (float("inf"), float("-inf")) for v in value):
            raise ValueError("speaker_embedding values must be finite")
        return value

    @model_validator(mode="after")
    def _aliases(self) -> SpeechRequest:
        if self.response_format in FORMAT_ALIASES:
            if self.response_format in RAW_FORMATS and self.sample_rate not in (None, 8000):
                raise ValueError(f"response_format {self.response_format} is 8000 Hz; sample_rate {self.sample_rate} conflicts")
            self._raw = self.response_format in RAW_FORMATS
            self.response_format = FORMAT_ALIASES[self.response_format]
        if self.speaker is not None:
            if self.voice is not None:
                raise ValueError("give voice or speaker, not both")
            self.voice, self.speaker = self.speaker, None
        if self.references is not None:
            if not self.references:
                raise ValueError("references must hold at least one element")
            ref = self.references[0]
            self._more_references = list(self.references[1:])
            if self.ref_audio not in (None, ref.audio_path) or (self.ref_text not in (None, ref.text) and ref.text is not None):
                raise ValueError("references conflicts with ref_audio/ref_text")
            self.ref_audio, self.ref_text = ref.audio_path, ref.text if ref.text is not None else self.ref_text
            self.references = None
        return self

    @property
    def more_references(self) -> list[Reference]:
        return self._more_references

    @property
    def unknown_fields(self) -> list[str]:
        """Keys of the body that are no field of this API (the first 16, each cut to 64 characters)."""
        return sorted(name[:64] for name in self.model_extra or {})[:16]

    @property
    def voice_name(self) -> str:
        if isinstance(self.voice, VoiceRef):
            return self.voice.id
        return self.voice or ""

    @property
    def streaming(self) -> bool:
        """Whether the client asked for a stream (raw or SSE)."""
        return self.stream_format is not None or self.stream

    @property
    def sse(self) -> bool:
        """Server-sent events: stream_format "sse", or `stream` without a stream_format."""
        return self.stream_format == "sse" or (self.stream and self.stream_format is None)

    @property
    def progressive(self) -> bool:
        """Whether the response body leaves as it is made (chunked transfer)."""
        return self.streaming or self._raw or self.response_format not in WHOLE_FILE_FORMATS

    @property
    def stream_delivery(self) -> bool:
        """Whether to ask for AUDIO_DELIVERY_STREAM (else a file, which still leaves as it is made where the
        format allows: PCM, MP3, Opus, AAC)."""
        return self.streaming or self._raw


class _BatchFields(BaseModel):
    """Fields a batch sets for all its items and an item may override (vLLM-Omni's batch shape)."""

    voice: str | None = Field(default=None, description="Voice name.")
    instructions: str | None = Field(default=None, description="Style or voice description.")
    speed: float | None = Field(default=None, description=SPEED)
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = Field(default=None, description="Qwen3-TTS task.")
    language: str | None = Field(default=None, description="Language of the text.")
    ref_audio: str | None = Field(default=None, description="Reference clip for cloning.")
    ref_text: str | None = Field(default=None, description="Transcript of ref_audio.")
    x_vector_only_mode: bool | None = Field(default=None, description="Clone from the speaker embedding only.")
    max_new_tokens: int | None = Field(default=None, ge=1, le=2**31 - 1, description="Cap on generated tokens.")
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0, le=2**31 - 1, description="First chunk, in codec frames.")
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1, description="Seed (a Vocalis addition).")
    extra_params: dict[str, Any] | None = Field(default=None, description="Model-specific parameters (a Vocalis addition).")
    duration_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="Length of the audio, for models told a length.")


class BatchItem(_BatchFields):
    """One text of a batch; a field set here overrides the batch's."""

    input: str = Field(description="Text to speak.")
    response_format: ResponseFormat | None = Field(default=None, description="Audio format of this item.")


class BatchSpeechRequest(_BatchFields):
    """Body of POST /v1/audio/speech/batch: shared defaults and the items."""

    model: str | None = Field(default=None, description="Model name from /v1/models; omitted: the default model.")
    items: list[BatchItem] = Field(min_length=1, description="The texts, each with its overrides.")
    response_format: ResponseFormat = Field(default="wav", description="Audio format of every item that does not say.")

    def merged(self, item: BatchItem) -> dict[str, Any]:
        """The speech request for `item`: its own fields, else the batch's."""
        body: dict[str, Any] = {"model": self.model, "input": item.input}
        for name in (*_BatchFields.model_fields, "response_format"):
            own = getattr(item, name)
            body[name] = own if own is not None else getattr(self, name)
        return {k: v for k, v in body.items() if v is not None}


class BatchItemResult(BaseModel):
    """The outcome of one item, in request order."""

    index: int
    status: Literal["success", "error"]
    audio_data: str | None = Field(default=None, description="Base64 audio (success).")
    media_type: str | None = Field(default=None, description="Its media type (success).")
    error: str | None = Field(default=None, description="Why it failed (error).")
    busy: bool = Field(default=False, exclude=True)
    """Refused because the server's queue was full (not sent: the batch retries such items)."""


class BatchSpeechResponse(BaseModel):
    """Body of a POST /v1/audio/speech/batch answer."""

    id: str
    results: list[BatchItemResult]
    total: int
    succeeded: int
    failed: int
