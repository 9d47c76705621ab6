"""Shared state of the gateway, handed to routes as dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from vocalis.clients.aio import AsyncClient


def caller_credentials(connection: HTTPConnection) -> tuple[tuple[str, str], ...]:
    """The caller's API key, to forward as gRPC metadata: the Authorization header, or (for browsers'
    WebSockets, which cannot set headers) an `api_key` query parameter. The server checks it."""
    header = connection.headers.get("authorization")
    if header:
        return (("authorization", header),)
    token = connection.query_params.get("api_key") or connection.query_params.get("token")
    return (("authorization", f"Bearer {token}"),) if token else ()


def upstream(connection: HTTPConnection) -> AsyncClient:
    """The gRPC client of the server this gateway translates for, carrying the caller's credentials."""
    client: AsyncClient = connection.app.state.upstream
    return client.with_metadata(caller_credentials(connection))


Upstream = Annotated[AsyncClient, Depends(upstream)]
