"""Settings of the gateway itself, as opposed to the limits of the server behind it."""

from __future__ import annotations

from dataclasses import dataclass


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
