"""Server settings and request limits, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PROXY_CHECK_FALL, PROXY_CHECK_INTER_S, PROXY_CHECK_TIMEOUT_S = 2, 1.0, 1.0
"""The health-check timing deploy/haproxy/haproxy.cfg documents (fall 2, inter 1s, timeout check 1s)."""
DRAIN_DELAY_S = PROXY_CHECK_FALL * (PROXY_CHECK_INTER_S + PROXY_CHECK_TIMEOUT_S)
"""The longest such a proxy takes to mark a replica down: `fall` checks, each up to an interval plus its timeout (4 s)."""
HEAP_TRIM_AFTER_S = 60.0
"""Idle seconds before freed heap goes back: long enough that bursty traffic keeps it for reuse (heap_trim.py)."""
HEAP_TRIM_ABOVE_MIB = 256
"""...and only once the RSS has grown this much since the last trim: what usual requests reuse stays (heap_trim.py)."""


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
    max_units_in_flight: int = 3
    """Units of one session in the engine at once (unit N+1 is synthesized while N is sent); the rest wait their turn."""
    min_sample_rate: int = 8000
    max_sample_rate: int = 192000
    max_message_bytes: int = 16 * 1024 * 1024
    """Largest gRPC message accepted (requests carry reference audio)."""
    max_sessions_per_key: int = 0
    """Synthesize sessions one API key may hold at once; 0: no limit."""
    session_idle_timeout_s: float = 60.0
    """How long a session may stay open with its config and no text yet; past it, DEADLINE_EXCEEDED (IDLE_TIMEOUT)."""
    max_flush_id_chars: int = 256
    """Longest Flush.flush_id."""
    max_pending_marks: int = 256
    """Flushes and clears of one session not yet answered (a client that sends them and reads nothing is refused)."""
    max_plan_entries: int = 2048
    """Units and marks of one session waiting to be spoken, beyond what max_buffered_chars already bounds."""
    max_audio_seconds: float = 1800.0
    """Audio one session may produce, in seconds at its output speed, checked as it is made; past it the session
    ends with RESOURCE_EXHAUSTED (AUDIO_TOO_LONG; HTTP 413). 0: no cap. The longest text (5,000 characters) at the
    slowest speed (0.25) makes about 1,300 s; a model that runs away (no end token) is stopped here."""


def default_voice_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("vocalis")) / "voices"


@dataclass(frozen=True)
class VoiceConfig:
    """Where voices live and what an upload or a reference clip may be."""

    voice_dir: Path | None = None
    """Uploaded voices (shared by every process pointing at it). None: under the user's data dir."""
    voice_store: str | None = None
    """Where uploaded voices live when not in voice_dir: a postgresql:// URL (shared by replicas on any machine)."""
    voice_store_timeout_s: float = 1.0
    """The longest a voice store call waits for the database before answering UNAVAILABLE."""
    custom_voice_dir: Path | None = None
    """Precomputed voices: a directory with a manifest.json."""
    max_voices: int = 1000
    max_upload_bytes: int = 10 * 1024 * 1024
    min_seconds: float = 1.0
    max_seconds: float = 30.0
    allowed_ref_hosts: tuple[str, ...] = ()
    """Hosts `ref_audio` URLs may name; empty: URLs are refused."""
    ref_audio_dir: Path | None = None
    """Local files `ref_audio` may name must lie under this directory; None: local paths are refused."""
    ref_fetch_timeout_s: float = 10.0


@dataclass(frozen=True)
class SecurityConfig:
    """Who may call, and over what."""

    api_keys: tuple[str, ...] = ()
    """Accepted keys; empty: the server is open."""
    open_health: bool = True
    """Health checks (gRPC health, HTTP /health) need no key."""
    open_metrics: bool = True
    """GET /metrics needs no key."""
    reflection: str = "open"
    """gRPC server reflection: "off" (not served), "open" (no key needed) or "keyed" (needs a key, like any RPC)."""
    tls_cert: Path | None = None
    """PEM certificate (chain) for gRPC and HTTP; with tls_key, both listen with TLS."""
    tls_key: Path | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None and self.tls_key is not None


@dataclass(frozen=True)
class ServerConfig:
    """Where the server listens and what it loads."""

    model: str | None = None
    """Model spec to load (checkpoint directory, Piper voice, or Hugging Face repo id); None: the embedded Piper voice."""
    served_model_names: tuple[str, ...] = ()
    """Names requests use for the model: the first is its name, the rest aliases. Empty: the repo id, else the checkpoint's name."""
    strict_fields: bool = False
    """Refuse (400 / INVALID_ARGUMENT) every request field that would otherwise be accepted with a warning."""
    deploy_config: Path | None = None
    """YAML merged over the family's deploy defaults."""
    stage_overrides: str | None = None
    """JSON merged last, keyed by stage index or name."""
    family_modules: tuple[str, ...] = ()
    """Modules defining extra model families."""
    forced_aligner: Path | None = None
    """A Wav2Vec2ForCTC checkpoint that times the words of a model that cannot time its own."""
    grpc_address: str = "0.0.0.0:50051"
    http_host: str = "0.0.0.0"
    http_port: int = 8091
    limits: Limits = field(default_factory=Limits)
    voices: VoiceConfig = field(default_factory=VoiceConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    drain_delay_s: float = DRAIN_DELAY_S
    """On SIGTERM, how long new work is still admitted after the probes turn NOT_SERVING (the proxies noticing)."""
    drain_grace_s: float = 30.0
    """Then, how long running sessions may take to finish before the process exits."""
    retry_after_s: int = 1
    """Seconds a client is told to wait after RESOURCE_EXHAUSTED."""
    heap_trim_after_s: float = HEAP_TRIM_AFTER_S
    """How long the server must have had no session before it gives freed heap back (server/heap_trim.py)."""
    heap_trim_above_mib: int = HEAP_TRIM_ABOVE_MIB
    """How far the RSS must have grown since the last trim for the idle trim to run (server/heap_trim.py)."""
