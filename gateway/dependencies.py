"""Shared state of the gateway, handed to routes as dependencies."""

from __future__ import annotations

from typing import Annotated

import grpc
from fastapi import Depends
from starlette.requests import HTTPConnection

from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import Unauthenticated
from vocalis.gateway.config import GatewayConfig


def caller_credentials(connection: HTTPConnection) -> tuple[tuple[str, str], ...]:
    """The caller's API key, to forward as gRPC metadata: the Authorization header, or, on the WebSocket only
    (browsers' WebSockets cannot set headers), an `api_key` or `token` query parameter. The server checks it.

    Keys in URLs end up in logs, so no other route reads them there. A header that gRPC metadata cannot carry
    (a tab, a non-ASCII byte) is a 401 on HTTP; on the WebSocket it counts as no key, which the server refuses.
    """
    websocket = connection.scope["type"] == "websocket"
    header = connection.headers.get("authorization")
    if header:
        if _metadata_safe(header):
            return (("authorization", header),)
        if not websocket:
            raise Unauthenticated(
                grpc.StatusCode.UNAUTHENTICATED, "the Authorization header must be printable ASCII: 'Bearer KEY'", "INVALID_AUTHORIZATION"
            )
        return ()
    token = (connection.query_params.get("api_key") or connection.query_params.get("token")) if websocket else None
    if token and _metadata_safe(token):
        return (("authorization", f"Bearer {token}"),)
    return ()


def _metadata_safe(value: str) -> bool:
    """Whether gRPC metadata can carry `value`: printable ASCII only."""
    return all(" " <= character <= "~" for character in value)


def upstream(connection: HTTPConnection) -> AsyncClient:
    """The gRPC client of the server this gateway translates for, carrying the caller's credentials."""
    client: AsyncClient = connection.app.state.upstream
    return client.with_metadata(caller_credentials(connection))


Upstream = Annotated[AsyncClient, Depends(upstream)]


def gateway_config(connection: HTTPConnection) -> GatewayConfig:
    """The knobs this gateway was built with (create_app's `config`)."""
    config: GatewayConfig = connection.app.state.config
    return config


Config = Annotated[GatewayConfig, Depends(gateway_config)]
