"""Cross-cutting HTTP concerns: a request id on every response, and a bound on body size."""

from __future__ import annotations

import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vocalis.gateway.errors import error_body


class RequestLimits:
    """Adds X-Request-Id (the caller's, or a new one) to every response; refuses bodies over
    `max_body_bytes` (GatewayConfig.max_body_bytes) with 413."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        request_id = (headers.get(b"x-request-id") or uuid.uuid4().hex.encode())[:128]
        scope.setdefault("state", {})["request_id"] = request_id.decode("latin-1")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                if b"x-request-id" not in names:
                    message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id)]}
            await send(message)

        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await _too_large(send_with_id, self.max_body_bytes)
            return
        received = 0

        async def bounded_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, bounded_receive, send_with_id)
        except BodyTooLarge:
            await _too_large(send_with_id, self.max_body_bytes)


class TrailingSlash:
    """Serves `/v1/audio/speech/` as `/v1/audio/speech`, where a redirect would lose a POST body on many clients."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] in ("http", "websocket") and len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/", "raw_path": scope.get("raw_path", b"").rstrip(b"/") or b"/"}
        await self.app(scope, receive, send)


class BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    import json

    body = json.dumps(error_body(413, f"request body larger than {limit // 2**20} MiB")).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
