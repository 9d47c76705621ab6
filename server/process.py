"""Start-up and shut-down of a serving process: model, engine, gRPC server, gateway.

Start-up: load the model, listen (health NOT_SERVING, sessions UNAVAILABLE), warm the
model up with one short utterance, then SERVING. On SIGTERM or SIGINT: drain in two steps —
health NOT_SERVING at once while new sessions are still admitted for `drain_delay_s` (the proxies'
checks notice and stop sending; SIGINT skips this step), then new sessions UNAVAILABLE and running ones get `drain_grace_s`
to finish — then stop the gateway and the gRPC server and exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

import uvicorn

from vocalis.server.config import SecurityConfig, ServerConfig
from vocalis.server.http_protocol import timed_h11

log = logging.getLogger(__name__)

AppFactory = Callable[..., object]
"""Builds the HTTP gateway app for a gRPC upstream address (vocalis.gateway.app.create_app)."""


class Listener(Protocol):
    """The HTTP listener's knobs: vocalis.gateway.config.GatewayConfig has them (and is where their defaults live)."""

    @property
    def max_connections(self) -> int: ...
    @property
    def keep_alive_timeout_s(self) -> int: ...
    @property
    def head_timeout_s(self) -> float: ...
    @property
    def body_timeout_s(self) -> float: ...
    @property
    def ws_max_frame_bytes(self) -> int: ...


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that leaves signals to us, so that a drain can run before it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _uvicorn(
    app: object, host: str, port: int, log_level: str, security: SecurityConfig, listener: Listener, own_signals: bool
) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        ssl_certfile=str(security.tls_cert) if security.tls else None,
        ssl_keyfile=str(security.tls_key) if security.tls else None,
        timeout_graceful_shutdown=5,
        # Slow and greedy clients: every request head and body must arrive within a deadline (TimedH11Protocol),
        # idle keep-alive connections close, and past max_connections new requests get 503.
        http=timed_h11(listener.head_timeout_s, listener.body_timeout_s),
        timeout_keep_alive=listener.keep_alive_timeout_s,
        limit_concurrency=listener.max_connections,
        # WebSocket frames: none much larger than a session.config may be (StreamLimits.max_config_chars), and only
        # a few queued before the gateway's own byte-bounded inbox takes them.
        ws_max_size=listener.ws_max_frame_bytes,
        ws_max_queue=4,
    )
    return _Uvicorn(config) if own_signals else uvicorn.Server(config)


async def run_server(
    config: ServerConfig, create_gateway: AppFactory | None, log_level: str = "warning", listener: Listener | None = None
) -> None:
    """Load the model, serve gRPC (and the gateway beside it, on `listener`'s terms) until SIGINT/SIGTERM, then drain."""
    if create_gateway is not None and listener is None:
        raise ValueError("a gateway needs its listener settings (GatewayConfig)")
    # Imported here so that a gateway-only process never loads torch or the engine.
    from vocalis.server.engine import Engine
    from vocalis.server.grpc_server import start_grpc_server
    from vocalis.server.heap_trim import keep_freed_heap
    from vocalis.server.voice_catalog import build_voice_catalog
    from vocalis.server.warmup import warm_up
    from vocalis.stages.models.registry import load_model

    keep_freed_heap()  # before the model allocates; the idle trim (grpc_server.py) gives it back
    model = await asyncio.to_thread(
        load_model, config.model, config.deploy_config, config.stage_overrides, config.family_modules, config.served_model_names
    )
    if config.forced_aligner is not None:
        from vocalis.stages.runtime.openmp_teams import then_release
        from vocalis.stages.text.aligner.aligner import attach_aligner

        await asyncio.to_thread(then_release, attach_aligner, model, config.forced_aligner)
    engine = Engine([model], config.limits.max_queued_requests, config.retry_after_s)
    catalog = build_voice_catalog(engine, config.voices)
    grpc_server = await start_grpc_server(engine, config, catalog)
    stop = asyncio.Event()
    received: list[signal.Signals] = []
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda sig=sig: (received.append(sig), stop.set()))
    http = None
    serving: asyncio.Task | None = None
    try:
        await warm_up(engine)
        await grpc_server.ready()
        print(f"vocalis: model {model.name} on gRPC port {grpc_server.port}", file=sys.stderr, flush=True)
        if config.http_port and create_gateway is not None and listener is not None:
            tls_root = config.security.tls_cert.read_bytes() if config.security.tls else None  # type: ignore[union-attr]
            app = create_gateway(f"localhost:{grpc_server.port}", tls_root=tls_root)
            http = _uvicorn(app, config.http_host, config.http_port, log_level, config.security, listener, own_signals=True)
            serving = asyncio.create_task(http.serve())
            scheme = "https" if config.security.tls else "http"
            print(f"vocalis: HTTP gateway on {scheme}://{config.http_host}:{config.http_port}", file=sys.stderr, flush=True)
            await asyncio.wait([serving, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        else:
            await stop.wait()
        # SIGTERM is an orchestrator's or a proxy's operator taking the replica out: give the proxies the drain delay.
        # SIGINT is someone at a terminal: no proxy to wait for.
        delay = config.drain_delay_s if signal.SIGTERM in received else 0.0
        finished = await grpc_server.drain(delay, config.drain_grace_s)
        if not finished:
            log.warning("drain: %d sessions still running after %.0f s; stopping them", grpc_server.lifecycle.in_flight, config.drain_grace_s)
    finally:
        if http is not None:
            http.should_exit = True
            if serving is not None:  # let uvicorn finish its lifespan: cancelled, it prints a traceback
                await asyncio.wait({serving}, timeout=8)
        await grpc_server.server.stop(grace=1)
        engine.close()
        catalog.store.close()


async def run_gateway(
    create_gateway: AppFactory,
    listener: Listener,
    upstream: str | Mapping[str, Sequence[str]],
    host: str,
    port: int,
    log_level: str = "warning",
    security: SecurityConfig | None = None,
) -> None:
    await _uvicorn(create_gateway(upstream), host, port, log_level, security or SecurityConfig(), listener, own_signals=False).serve()
