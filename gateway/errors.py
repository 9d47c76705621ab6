"""The one place where gRPC statuses and validation failures become HTTP responses.

Bodies use the OpenAI error envelope: {"error": {"message", "type", "param", "code"}}.
"""

from __future__ import annotations

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vocalis.clients.errors import VocalisError

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


def http_status(error: VocalisError) -> int:
    if error.code == grpc.StatusCode.RESOURCE_EXHAUSTED and not error.reason:
        return 413  # gRPC's own message-size limit (the server's refusals for load always carry a reason)
    return HTTP_STATUS.get(error.code, 500)


def http_field(field: str) -> str | None:
    if not field:
        return None
    head, _, rest = field.partition(".")
    return HTTP_FIELDS.get(head, head) + (f".{rest}" if rest else "")


def ws_field(field: str) -> str | None:
    """The WebSocket session.config name of a gRPC field."""
    return WS_FIELDS.get(field, field) or None


def error_body(status: int, message: str, param: str | None = None, reason: str | None = None) -> dict:
    body = {"message": message, "type": _TYPES.get(status, "server_error"), "param": param, "code": status}
    if reason:
        body["reason"] = reason
    return {"error": body}


def error_response(error: VocalisError) -> JSONResponse:
    status = http_status(error)
    headers = {}
    if status == 429:
        headers["Retry-After"] = error.metadata.get("retry_after_s", "1")
    return JSONResponse(error_body(status, error.message, http_field(error.field), error.reason or None), status, headers)


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the OpenAI envelope."""

    @app.exception_handler(VocalisError)
    async def _vocalis(_: Request, exc: VocalisError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(part) for part in first.get("loc", ()) if part != "body"]
        param = ".".join(loc) or None
        message = first.get("msg", "invalid request")
        if first.get("type") == "extra_forbidden":
            message = f"unknown field {param!r}"
        elif first.get("type") == "json_invalid":
            message = "request body is not valid JSON"
            param = None
        elif param:
            message = f"{param}: {message}"
        return JSONResponse(error_body(400, message, param, "INVALID_REQUEST"), 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(exc.status_code, str(exc.detail)), exc.status_code, getattr(exc, "headers", None))
