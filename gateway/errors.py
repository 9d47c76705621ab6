"""The one place where gRPC statuses and validation failures become HTTP responses.

Bodies use the OpenAI error envelope: {"error": {"message", "type", "param", "code"}}.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vocalis.clients.errors import FieldViolation, VocalisError

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    501: "not_implemented_error",
    503: "service_unavailable_error",
    504: "timeout_error",
}


# gRPC field names whose name differs on each face of the gateway.
HTTP_FIELDS = {"text": "input", "encoding": "response_format", "delivery": "stream"}
WS_FIELDS = {
    "encoding": "response_format",
    "delivery": "stream_audio",
    "text_splitting.granularity": "split_granularity",
    "text_splitting.max_unit_chars": "max_unit_chars",
    "text_splitting.idle_flush_ms": "idle_flush_ms",
}


TOO_LARGE_REASONS = frozenset({"AUDIO_TOO_LONG"})
"""RESOURCE_EXHAUSTED reasons that are the request's own size, not the server's load: 413, not 429."""


def http_status(error: VocalisError) -> int:
    if error.code == grpc.StatusCode.RESOURCE_EXHAUSTED and (not error.reason or error.reason in TOO_LARGE_REASONS):
        return 413  # gRPC's own message-size limit (the server's refusals for load carry a reason of their own)
    return HTTP_STATUS.get(error.code, 500)


def http_field(field: str) -> str | None:
    if not field:
        return None
    head, _, rest = field.partition(".")
    return HTTP_FIELDS.get(head, head) + (f".{rest}" if rest else "")


def ws_field(field: str) -> str | None:
    """The WebSocket session.config name of a gRPC field."""
    return WS_FIELDS.get(field, field) or None


def renamed_field(error: VocalisError, grpc_field: str, http_field: str) -> VocalisError:
    """`error` as the route's caller knows the field: a route whose HTTP field is another call's gRPC field (the
    batch's `model` is GetModel's `name`) renames it in the field violations and at the head of the message."""
    if error.field != grpc_field:
        return error
    message = http_field + error.message.removeprefix(grpc_field) if error.message.startswith(grpc_field) else error.message
    violations = [FieldViolation(http_field if v.field == grpc_field else v.field, v.description) for v in error.field_violations]
    return replace(error, message=message, field_violations=violations)


def error_body(status: int, message: str, param: str | None = None, reason: str | None = None) -> dict:
    body = {"message": message, "type": _TYPES.get(status, "server_error"), "param": param, "code": status}
    if reason:
        body["reason"] = reason
    return {"error": body}


def validation_message(errors: Sequence[Any], required: Sequence[str] = ()) -> tuple[str, str | None]:
    """A pydantic validation failure as (message for people, the field at fault), from its first error.

    `required`: the body's required fields, named when the body is missing altogether."""
    first = errors[0] if errors else {}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(loc) or None
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    kind = first.get("type")
    if kind == "extra_forbidden":
        message = f"unknown field {param!r}"
    elif kind == "json_invalid":
        message, param = "request body is not valid JSON", None
    elif kind == "missing" and param is None:
        param = required[0] if required else None
        fields = f" with {', '.join(required)}" if required else ""
        message = f"the request body is missing: send a JSON object{fields} (Content-Type: application/json)"
    elif param:
        message = f"{param}: {message}"
    return message, param


def error_response(error: VocalisError) -> JSONResponse:
    status = http_status(error)
    headers = {}
    if status in (429, 503):  # overloaded, draining or the voice store away: try again after this
        headers["Retry-After"] = error.metadata.get("retry_after_s", "1")
    return JSONResponse(error_body(status, error.message, http_field(error.field), error.reason or None), status, headers)


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the OpenAI envelope."""

    @app.exception_handler(VocalisError)
    async def _vocalis(_: Request, exc: VocalisError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(exc.errors(), _required_fields(request))
        return JSONResponse(error_body(400, message, param, "INVALID_REQUEST"), 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(exc.status_code, str(exc.detail)), exc.status_code, getattr(exc, "headers", None))


def _required_fields(request: Request) -> list[str]:
    """The required fields of the route's JSON body model, if it has one."""
    body = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(body, "type_", None) or getattr(getattr(body, "field_info", None), "annotation", None)
    fields = getattr(model, "model_fields", {})
    return [name for name, info in fields.items() if info.is_required()]
