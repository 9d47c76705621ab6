"""The FastAPI application: routers, error handlers and the upstream gRPC channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from vocalis import __version__
from vocalis.clients.aio import AsyncClient
from vocalis.gateway import catalog, errors, speech


def create_app(upstream: str) -> FastAPI:
    """A gateway that translates HTTP into gRPC calls to the server at `upstream` (HOST:PORT)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.upstream = AsyncClient(upstream)
        try:
            yield
        finally:
            await app.state.upstream.close()

    app = FastAPI(title="Vocalis", version=__version__, lifespan=lifespan)
    errors.install(app)
    app.include_router(speech.router)
    app.include_router(catalog.router)
    return app
