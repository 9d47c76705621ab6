"""Start-up and shut-down of a serving process: model, engine, gRPC server, gateway."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable

import uvicorn

from vocalis.server.config import ServerConfig

log = logging.getLogger(__name__)


def _uvicorn(app: object, host: str, port: int, log_level: str) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on"))


AppFactory = Callable[[str], object]
"""Builds the HTTP gateway app for a gRPC upstream address (vocalis.gateway.app.create_app)."""


async def run_server(config: ServerConfig, create_gateway: AppFactory | None, log_level: str = "warning") -> None:
    """Load the model, serve gRPC (and the gateway beside it) until SIGINT/SIGTERM."""
    # Imported here so that a gateway-only process never loads torch or the engine.
    from vocalis.server.engine import Engine
    from vocalis.server.grpc_server import start_grpc_server
    from vocalis.stages.models.registry import load_model

    model = await asyncio.to_thread(
        load_model, config.model, config.deploy_config, config.stage_overrides, config.family_modules
    )
    engine = Engine([model], config.limits.max_queued_requests, config.retry_after_s)
    grpc_server = await start_grpc_server(engine, config)
    print(f"vocalis: model {model.name} on gRPC port {grpc_server.port}", file=sys.stderr, flush=True)
    try:
        if config.http_port and create_gateway is not None:
            http = _uvicorn(create_gateway(f"127.0.0.1:{grpc_server.port}"), config.http_host, config.http_port, log_level)
            print(f"vocalis: HTTP gateway on http://{config.http_host}:{config.http_port}", file=sys.stderr, flush=True)
            await http.serve()  # returns on SIGINT/SIGTERM
        else:
            await grpc_server.server.wait_for_termination()
    finally:
        await grpc_server.stop(grace=5)
        engine.close()


async def run_gateway(create_gateway: AppFactory, upstream: str, host: str, port: int, log_level: str = "warning") -> None:
    await _uvicorn(create_gateway(upstream), host, port, log_level).serve()
