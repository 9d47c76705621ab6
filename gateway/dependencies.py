"""Shared state of the gateway, handed to routes as dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from vocalis.clients.aio import AsyncClient


def upstream(request: Request) -> AsyncClient:
    """The gRPC client of the server this gateway translates for."""
    return request.app.state.upstream


Upstream = Annotated[AsyncClient, Depends(upstream)]
