"""Shared state of the gateway, handed to routes as dependencies."""

from __future__ import annotations

import re
from typing import Annotated

import grpc
from fastapi import Depends
from starlette.requests import HTTPConnection

from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import VocalisError

_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


def caller_credentials(connection: HTTPConnection) -> tuple[tuple[str, str], ...]:
    """The caller's API key, to forward as gRPC metadata: the Authorization header, or (only for browsers'
    WebSockets, which cannot set headers) an `api_key` query parameter. The server checks it.

    A key that gRPC metadata cannot carry (control characters, non-ASCII) is UNAUTHENTICATED here.
    """
    header = connection.headers.get("authorization")
    if not header and connection.scope["type"] == "websocket":
        token = connection.query_params.get("api_key") or connection.query_params.get("token")
        header = f"Bearer {token}" if token else None
    if not header:
        return ()
    if not _PRINTABLE_ASCII.fullmatch(header):
        raise VocalisError(
            grpc.StatusCode.UNAUTHENTICATED, "the API key must be printable ASCII: 'Authorization: Bearer KEY'", "INVALID_AUTHORIZATION"
        )
    return (("authorization", header),)


def upstream(connection: HTTPConnection) -> AsyncClient:
    """The gRPC client of the server this gateway translates for, carrying the caller's credentials."""
    client: AsyncClient = connection.app.state.upstream
    return client.with_metadata(caller_credentials(connection))


Upstream = Annotated[AsyncClient, Depends(upstream)]
