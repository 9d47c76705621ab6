"""The FastAPI application: routers, error handlers and the upstream gRPC channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from vocalis import __version__
from vocalis.clients.aio import AsyncClient
from vocalis.gateway import batch, catalog, demo, errors, speech, stream, voices
from vocalis.gateway.config import BatchLimits, StreamLimits
from vocalis.gateway.middleware import RequestLimits, TrailingSlash


def create_app(
    upstream: str, stream_limits: StreamLimits | None = None, *, tls_root: bytes | None = None, request_timeout_s: float = 600.0
) -> FastAPI:
    """A gateway that translates HTTP and WebSocket into gRPC calls to the server at `upstream` (HOST:PORT).

    With `tls_root` (PEM), the upstream is dialed over TLS, trusting that certificate.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.upstream = AsyncClient(upstream, root_certificates=tls_root)
        try:
            yield
        finally:
            await app.state.upstream.close()

    app = FastAPI(title="Vocalis", version=__version__, lifespan=lifespan)
    app.state.stream_limits = stream_limits or StreamLimits()
    app.state.batch_limits = BatchLimits()
    app.state.request_timeout_s = request_timeout_s
    """Deadline of a speech request (504 past it) unless the caller's X-Request-Timeout says otherwise."""
    errors.install(app)
    app.add_middleware(RequestLimits)
    app.add_middleware(TrailingSlash)
    app.include_router(speech.router)
    app.include_router(batch.router)
    app.include_router(catalog.router)
    app.include_router(voices.router)
    app.include_router(stream.router)
    app.include_router(demo.router)
    return app
