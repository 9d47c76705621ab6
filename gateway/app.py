"""The FastAPI application: routers, error handlers and the upstream gRPC channel."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI

from vocalis import __version__
from vocalis.clients.aio import AsyncClient
from vocalis.gateway import batch, catalog, demo, errors, speech, stream, voices
from vocalis.gateway.batch_items import BatchItemCap
from vocalis.gateway.config import GatewayConfig
from vocalis.gateway.middleware import RequestLimits, TrailingSlash
from vocalis.gateway.pools import UpstreamPools


def create_app(
    upstream: str | Mapping[str, Sequence[str]], config: GatewayConfig | None = None, *, tls_root: bytes | None = None
) -> FastAPI:
    """A gateway that translates HTTP and WebSocket into gRPC calls to the server at `upstream` (HOST:PORT),
    with the knobs of `config` (default: GatewayConfig()). `upstream` may instead map model names to pools of
    servers ("" for the default pool): requests go to their model's pool (gateway/pools.py).

    With `tls_root` (PEM), the upstream is dialed over TLS, trusting that certificate.
    """
    config = config or GatewayConfig()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if isinstance(upstream, str):
            app.state.upstream = AsyncClient(upstream, root_certificates=tls_root)
        else:
            app.state.upstream = UpstreamPools(upstream, root_certificates=tls_root)
        try:
            yield
        finally:
            await app.state.upstream.close()

    app = FastAPI(title="Vocalis", version=__version__, lifespan=lifespan)
    app.state.config = config  # read by routes only through dependencies.Config
    errors.install(app)
    app.add_middleware(BatchItemCap, max_items=config.batch.max_items)  # inside RequestLimits: the body is bounded first
    app.add_middleware(RequestLimits, max_body_bytes=config.max_body_bytes)
    app.add_middleware(TrailingSlash)
    app.include_router(speech.router)
    app.include_router(batch.router)
    app.include_router(catalog.router)
    app.include_router(voices.router)
    app.include_router(stream.router)
    app.include_router(demo.router)
    return app
