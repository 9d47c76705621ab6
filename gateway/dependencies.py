"""Shared state of the gateway, handed to routes as dependencies."""

from __future__ import annotations

from fastapi import Request

from vocalis.clients.aio import AsyncClient


def upstream(request: Request) -> AsyncClient:
    """The gRPC client of the server this gateway translates for."""
    return request.app.state.upstream
