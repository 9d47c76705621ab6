"""The `vocalis` command: serve a model, run a gateway, or speak through a server.

This module is the composition root: the only place that imports the server, the
gateway and the client commands together, to start them in one process.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import click

from vocalis.clients.bench_cli import bench
from vocalis.clients.cli import say
from vocalis.clients.text_stream import stream
from vocalis.clients.voices_cli import voices
from vocalis.gateway.config import GatewayConfig
from vocalis.gateway.flags import gateway_options
from vocalis.server.auth import load_keys
from vocalis.server.config import (
    DRAIN_DELAY_S,
    HEAP_TRIM_ABOVE_MIB,
    HEAP_TRIM_AFTER_S,
    SecurityConfig,
    ServerConfig,
    VoiceConfig,
)


def _configure_logging(level: str) -> None:
    from vocalis.server.log_format import configure

    configure(level)


@click.group()
@click.version_option(package_name="vocalis")
def main() -> None:
    """Vocalis: streaming text-to-speech over gRPC, with an OpenAI-compatible HTTP gateway."""


@main.command()
@click.argument("model", required=False)
@click.option("--served-model-name", multiple=True,
              help="Name requests use for the model (repeatable: the first is its name, the others aliases). "
                   "Default: the Hub repo id when MODEL is one, else the checkpoint's name.")
@click.option("--strict-fields", is_flag=True,
              help="Refuse (400) request fields the model would ignore, instead of accepting them with a warning.")
@click.option("--grpc-address", default="0.0.0.0:50051", show_default=True, help="gRPC listen address.")
@click.option("--host", default="0.0.0.0", show_default=True, help="HTTP gateway listen host.")
@click.option("--port", default=8091, show_default=True, type=int, help="HTTP gateway port (0: no gateway).")
@click.option("--max-input-chars", default=5000, show_default=True, type=int, help="Longest text a session may send.")
@click.option("--max-audio-seconds", default=1800.0, show_default=True, type=click.FloatRange(min=0),
              help="Audio one session (one HTTP request) may produce, in seconds; past it: 413 / RESOURCE_EXHAUSTED. 0: no cap.")
@click.option("--max-queued-requests", default=64, show_default=True, type=int, help="Utterances admitted per model before 429.")
@click.option("--deploy-config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="YAML merged over the family's deploy defaults (per-stage max_num_seqs, chunk sizes, dtype, ...).")
@click.option("--stage-overrides", default=None, help='JSON merged last, by stage index or name: \'{"1": {"max_num_seqs": 4}}\'.')
@click.option("--family-module", multiple=True, help="Import a module that defines an extra model family (FAMILY).")
@click.option("--forced-aligner", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A Wav2Vec2ForCTC checkpoint directory: word timestamps for a model that cannot time its own words.")
@click.option("--voice-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where uploaded voices are stored; share it between processes (default: under the user's data dir).")
@click.option("--voice-store", default=None, metavar="URL",
              help="Keep uploaded voices in PostgreSQL (postgresql://user@host:port/db), shared by replicas on any "
                   "machine, instead of --voice-dir.")
@click.option("--voice-store-timeout", default=1.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds a voice store call waits for the database before answering UNAVAILABLE (503, Retry-After).")
@click.option("--custom-voice-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Precomputed voices: a directory with a manifest.json.")
@click.option("--max-voices", default=1000, show_default=True, type=int, help="Most uploaded voices the store holds.")
@click.option("--allow-ref-audio-host", multiple=True, help="A host that ref_audio URLs may name (repeatable; none: URLs refused).")
@click.option("--ref-audio-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Local ref_audio paths must lie under this directory (default: local paths refused).")
@click.option("--api-key", multiple=True, help="An accepted API key (repeatable); callers send 'authorization: Bearer KEY'.")
@click.option("--api-key-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A file of accepted API keys, one per line.")
@click.option("--closed-health", is_flag=True, help="Require a key for health checks too (default: open).")
@click.option("--closed-metrics", is_flag=True, help="Require a key for GET /metrics (default: open).")
@click.option("--reflection", default="open", show_default=True, type=click.Choice(["off", "open", "keyed"]),
              help="gRPC server reflection: off, open (no key needed) or keyed (a key needed, like any RPC).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None, help="PEM certificate: TLS on gRPC and HTTP.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None, help="PEM private key for --tls-cert.")
@click.option("--max-sessions-per-key", default=0, show_default=True, type=int, help="Open sessions one key may hold (0: no limit).")
@click.option("--session-idle-timeout", default=60.0, show_default=True, type=float,
              help="Seconds a Synthesize session may wait between its config and its first text.")
@click.option("--drain-delay", default=DRAIN_DELAY_S, show_default=True, type=click.FloatRange(min=0),
              help="On SIGTERM, seconds new work is still admitted after /ready turns 503, so the proxy's health checks "
                   "take the replica out before it refuses anything (default: fall x (inter + timeout) of "
                   "deploy/haproxy/haproxy.cfg, 2 x (1 s + 1 s)).")
@click.option("--heap-trim-after", default=HEAP_TRIM_AFTER_S, show_default=True, type=click.FloatRange(min=0),
              help="Seconds with no session before the server gives freed heap back to the OS. Until then a request "
                   "reuses what the last ones freed (Piper's runs take ~1.1-1.25x as long on fresh memory).")
@click.option("--heap-trim-above", default=HEAP_TRIM_ABOVE_MIB, show_default=True, type=click.IntRange(min=0),
              help="MiB the RSS must have grown since the last trim for the idle trim to run: sporadic requests keep what "
                   "they reuse (after a trim a short Piper prompt took 1.26x Piper's own server's time, else 1.06x), "
                   "what a burst of long ones left goes back.")
@click.option("--drain-grace", default=30.0, show_default=True, type=float,
              help="Then, seconds running sessions get to finish before the process exits.")
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@gateway_options
def serve(
    model: str | None,
    served_model_name: tuple[str, ...],
    strict_fields: bool,
    grpc_address: str,
    host: str,
    port: int,
    max_input_chars: int,
    max_audio_seconds: float,
    max_queued_requests: int,
    deploy_config: Path | None,
    stage_overrides: str | None,
    family_module: tuple[str, ...],
    forced_aligner: Path | None,
    voice_dir: Path | None,
    voice_store: str | None,
    voice_store_timeout: float,
    custom_voice_dir: Path | None,
    max_voices: int,
    allow_ref_audio_host: tuple[str, ...],
    ref_audio_dir: Path | None,
    api_key: tuple[str, ...],
    api_key_file: Path | None,
    closed_health: bool,
    closed_metrics: bool,
    reflection: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    max_sessions_per_key: int,
    session_idle_timeout: float,
    drain_delay: float,
    drain_grace: float,
    heap_trim_after: float,
    heap_trim_above: int,
    log_level: str,
    gateway_config: GatewayConfig,
) -> None:
    """Serve MODEL over gRPC and HTTP (default: the embedded Piper voice en_US-joe-medium).

    MODEL is a checkpoint directory, a Piper .onnx voice, or a Hugging Face repo id such as
    Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice (taken from the local Hugging Face cache, else
    downloaded unless HF_HUB_OFFLINE is set)."""
    from vocalis.server.config import Limits

    _configure_logging(log_level)
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if voice_store is not None and voice_dir is not None:
        raise click.UsageError("--voice-store and --voice-dir are two places for the same voices: give one")
    if voice_store is not None and not voice_store.startswith(("postgresql://", "postgres://")):
        raise click.UsageError("--voice-store takes a postgresql:// URL (a directory goes in --voice-dir)")
    limits = Limits(
        max_input_chars=max_input_chars,
        max_buffered_chars=max_input_chars,
        max_queued_requests=max_queued_requests,
        max_audio_seconds=max_audio_seconds,
        max_sessions_per_key=max_sessions_per_key,
        session_idle_timeout_s=session_idle_timeout,
    )
    security = SecurityConfig(
        api_keys=load_keys(api_key, api_key_file),
        open_health=not closed_health,
        open_metrics=not closed_metrics,
        reflection=reflection,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
    config = ServerConfig(
        model=model,
        served_model_names=served_model_name,
        strict_fields=strict_fields,
        deploy_config=deploy_config,
        stage_overrides=stage_overrides,
        family_modules=family_module,
        forced_aligner=forced_aligner,
        grpc_address=grpc_address,
        http_host=host,
        http_port=port,
        limits=limits,
        voices=VoiceConfig(
            voice_dir=voice_dir,
            voice_store=voice_store,
            voice_store_timeout_s=voice_store_timeout,
            custom_voice_dir=custom_voice_dir,
            max_voices=max_voices,
            allowed_ref_hosts=allow_ref_audio_host,
            ref_audio_dir=ref_audio_dir,
        ),
        security=security,
        drain_delay_s=drain_delay,
        drain_grace_s=drain_grace,
        heap_trim_after_s=heap_trim_after,
        heap_trim_above_mib=heap_trim_above,
    )
    # Imported here: client commands should start fast, without torch and the engine.
    from vocalis.gateway.app import create_app
    from vocalis.server.process import run_server

    try:
        asyncio.run(run_server(config, functools.partial(create_app, config=gateway_config), log_level, gateway_config))
    except ValueError as error:  # a model or deploy config that cannot be loaded
        raise click.ClickException(str(error)) from None


@main.command()
@click.option("--upstream", multiple=True, default=("localhost:50051",), show_default=True,
              help="gRPC address of the Vocalis server; or, repeated, one pool per model: MODEL=HOST:PORT[,HOST:PORT...] "
                   "(requests go to their model's pool; /v1/models and /v1/audio/voices merge them).")
@click.option("--host", default="0.0.0.0", show_default=True, help="Listen host.")
@click.option("--port", default=8091, show_default=True, type=int, help="Listen port.")
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@gateway_options
def gateway(upstream: tuple[str, ...], host: str, port: int, log_level: str, gateway_config: GatewayConfig) -> None:
    """Run the HTTP/WebSocket gateway alone, in front of a server (or one pool of servers per model) at --upstream."""
    from vocalis.gateway.app import create_app
    from vocalis.gateway.pools import parse_upstreams
    from vocalis.server.process import run_gateway

    _configure_logging(log_level)
    try:
        pools = parse_upstreams(upstream)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--upstream") from None
    single = pools.get("") if len(pools) == 1 else None
    target = single[0] if single is not None and len(single) == 1 else pools
    asyncio.run(run_gateway(functools.partial(create_app, config=gateway_config), gateway_config, target, host, port, log_level))


main.add_command(say)
main.add_command(voices)
main.add_command(bench)
main.add_command(stream)
