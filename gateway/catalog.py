"""GET /v1/models, GET /v1/audio/voices and GET /health: what the upstream server offers."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
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
                "id": model.name,
                "object": "model",
                "created": 0,
                "owned_by": "vocalis",
                "family": model.family,
                "default": model.is_default,
                "capabilities": json_format.MessageToDict(model.capabilities, preserving_proto_field_name=True),
            }
            for model in models
        ],
    }


@router.get("/v1/audio/voices", tags=["voices"])
async def list_voices(client: Upstream, model: str = "") -> dict:
    voices = await client.list_voices(model)
    return {
        "voices": [voice.name for voice in voices],
        "voice_details": [
            json_format.MessageToDict(voice, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
            for voice in voices
        ],
        "uploaded_voices": [],
    }


@router.get("/health", tags=["health"])
async def health(client: Upstream) -> JSONResponse:
    if await client.serving():
        return JSONResponse({"status": "healthy"})
    return JSONResponse({"status": "unhealthy"}, status_code=503)
