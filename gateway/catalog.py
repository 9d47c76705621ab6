"""GET /v1/models, GET /health and GET /metrics: what the upstream server offers, and how it is doing.

The probes GET /live, /startup and /ready ask the server's health service for vocalis.live, vocalis.startup and
vocalis.ready (server/probes.py): 200 or 503, with the admission state the server reported in the body.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format

from vocalis.gateway.dependencies import Upstream

router = APIRouter()


@router.get("/v1/models", tags=["models"])
async def list_models(client: Upstream) -> dict:
    models = await client.list_models()
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "vocalis",
                "root": model.name,
                "family": model.family,
                "default": model.is_default,
                "capabilities": json_format.MessageToDict(model.capabilities, preserving_proto_field_name=True),
            }
            for model in models
            for name in (model.name, *model.aliases)  # one entry per served name, as vLLM lists them
        ],
    }


@router.get("/health", tags=["health"])
async def health(client: Upstream) -> JSONResponse:
    """200 when the server is serving, 503 when not (or unreachable); 401/403 when it wants a key (--closed-health)."""
    if await client.serving(raise_refusals=True):
        return JSONResponse({"status": "healthy"})
    return JSONResponse({"status": "unhealthy"}, status_code=503)


async def _probe(client: Upstream, service: str, name: str) -> JSONResponse:
    serving, admission = await client.probe(service)
    return JSONResponse({"status": name if serving else f"not {name}", **admission}, status_code=200 if serving else 503)


@router.get("/live", tags=["health"])
async def live(client: Upstream) -> JSONResponse:
    """200 while the server process (and its event loop) answers; a liveness probe."""
    return await _probe(client, "vocalis.live", "live")


@router.get("/startup", tags=["health"])
async def startup(client: Upstream) -> JSONResponse:
    """200 once the model is loaded and warmed up, 503 before; a start-up probe."""
    return await _probe(client, "vocalis.startup", "started")


@router.get("/ready", tags=["health"])
async def ready(client: Upstream) -> JSONResponse:
    """200 when the server takes new work: warmed up, not draining, below its admission limit; 503 otherwise.
    The body carries the admission state (state, sessions, queued per model, limit) for balancers."""
    return await _probe(client, "vocalis.ready", "ready")


@router.get("/metrics", tags=["health"], response_class=Response)
async def metrics(client: Upstream) -> Response:
    """The upstream server's Prometheus metrics (engine, stages, requests)."""
    exposition = await client.get_metrics()
    return Response(exposition.text, media_type=exposition.content_type)
