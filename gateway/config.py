"""Settings of the gateway itself, as opposed to the limits of the server behind it.

GatewayConfig is the one source of every gateway knob: `create_app` takes one, routes read it through the
`Config` dependency (gateway/dependencies.py), and the CLI's gateway flags take their defaults from it.
Limits that depend on the model (text length, speed range, embedding size) are not here: the server checks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StreamLimits:
    """Limits of WS /v1/audio/speech/stream; each breach is an `error` frame, and a close code where the socket cannot go on."""

    first_config_timeout_s: float = 10.0
    """How long a new socket may take to send session.config."""
    idle_timeout_s: float = 30.0
    """How long a socket may go without a message either way (audio counts) before it is closed."""
    max_config_chars: int = 4 * 1024 * 1024
    """Largest session.config message, in characters (it may carry reference audio)."""
    max_message_chars: int = 128 * 1024
    """Largest other message, in characters."""
    max_inbox_bytes: int = 8 * 1024 * 1024
    """Frames read and not yet handled, in bytes; when full, the socket is not read until they are (backpressure)."""


@dataclass(frozen=True)
class BatchLimits:
    """Limits of POST /v1/audio/speech/batch."""

    max_items: int = 32
    """Most items one batch may hold (vLLM-Omni's tts_batch_max_items default)."""
    max_concurrency: int = 8
    """Items of one batch synthesized at once; the server's admission bounds the total over all callers."""


@dataclass(frozen=True)
class GatewayConfig:
    """Every knob of the HTTP/WebSocket gateway."""

    request_timeout_s: float = 600.0
    """Deadline of a speech request (504 past it) unless the caller's X-Request-Timeout says otherwise; batch items too."""
    max_body_bytes: int = 32 * 1024 * 1024
    """Largest HTTP request body the gateway reads (413 past it); a 10 MiB upload, base64 or multipart, fits."""
    max_upload_bytes: int = 16 * 1024 * 1024
    """Most of a voice upload's audio_sample the gateway reads (413 past it); the server's own limit is checked there."""
    max_connections: int = 1024
    """Connections and requests the HTTP listener holds at once; beyond it, 503."""
    keep_alive_timeout_s: int = 5
    """How long an idle keep-alive connection stays open."""
    head_timeout_s: float = 10.0
    """Deadline of a request head, from the connection (or the previous response); past it the connection closes."""
    body_timeout_s: float = 60.0
    """Deadline of a request body, from its head; past it the connection closes."""
    ws_max_frame_bytes: int = 5 * 1024 * 1024
    """Largest WebSocket frame read at all (a session.config with reference audio fits); larger closes the socket, 1009."""
    stream: StreamLimits = field(default_factory=StreamLimits)
    """Limits of the WebSocket stream."""
    batch: BatchLimits = field(default_factory=BatchLimits)
    """Limits of the batch endpoint."""
