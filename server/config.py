"""Server settings and request limits, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Limits:
    """Bounds on what one caller may ask of the server; each breach is a clear error."""

    max_input_chars: int = 5000
    """Characters of text per session (OpenAI's own limit is 4096; we allow a little more)."""
    max_buffered_chars: int = 5000
    """Characters a session may hold unsynthesized."""
    max_queued_requests: int = 64
    """Utterances admitted per model (waiting or running); beyond it, RESOURCE_EXHAUSTED."""
    first_message_timeout_s: float = 10.0
    """How long a new session may take to send its config."""
    min_sample_rate: int = 8000
    max_sample_rate: int = 192000
    max_message_bytes: int = 16 * 1024 * 1024
    """Largest gRPC message accepted (requests carry reference audio)."""


@dataclass(frozen=True)
class ServerConfig:
    """Where the server listens and what it loads."""

    model: str | None = None
    """Model spec to load; None: the embedded Piper voice."""
    deploy_config: Path | None = None
    """YAML merged over the family's deploy defaults."""
    stage_overrides: str | None = None
    """JSON merged last, keyed by stage index or name."""
    family_modules: tuple[str, ...] = ()
    """Modules defining extra model families."""
    grpc_address: str = "0.0.0.0:50051"
    http_host: str = "0.0.0.0"
    http_port: int = 8091
    limits: Limits = field(default_factory=Limits)
    retry_after_s: int = 1
    """Seconds a client is told to wait after RESOURCE_EXHAUSTED."""
