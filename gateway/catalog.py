"""GET /v1/models, GET /health and GET /metrics: what the upstream server offers, and how it is doing."""

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


@router.get("/metrics", tags=["health"], response_class=Response)
async def metrics(client: Upstream) -> Response:
    """The upstream server's Prometheus metrics (engine, stages, requests)."""
    exposition = await client.get_metrics()
    return Response(exposition.text, media_type=exposition.content_type)
