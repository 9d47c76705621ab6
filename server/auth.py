"""API keys: who may call the server. Checked on every RPC, compared in constant time.

Keys come from `--api-key` (repeatable) and/or `--api-key-file` (one key per line,
`#` comments). With no keys configured, the server is open. Health checking (and,
when asked, reflection) can stay open so that load balancers and grpcurl work.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import grpc

from vocalis.server.errors import StatusError

HEALTH_PREFIX = "/grpc.health.v1.Health/"
REFLECTION_PREFIX = "/grpc.reflection."
METRICS_PREFIX = "/vocalis.tts.v1.Metrics/"


def load_keys(keys: Iterable[str], key_file: Path | None) -> tuple[str, ...]:
    collected = [k.strip() for k in keys if k.strip()]
    if key_file is not None:
        for line in key_file.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                collected.append(line)
    return tuple(dict.fromkeys(collected))


class ApiKeys:
    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def valid(self, presented: str | None) -> bool:
        """Whether `presented` is one of the keys; every key is compared, so timing tells nothing."""
        if not self._keys:
            return True
        candidate = (presented or "").encode()
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(candidate, key)
        return matched


def bearer_token(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class ApiKeyInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls without a valid `authorization: Bearer KEY` with UNAUTHENTICATED / PERMISSION_DENIED."""

    def __init__(self, keys: ApiKeys, open_health: bool = True, open_metrics: bool = True, open_reflection: bool = True) -> None:
        self.keys = keys
        choices = ((HEALTH_PREFIX, open_health), (METRICS_PREFIX, open_metrics), (REFLECTION_PREFIX, open_reflection))
        self.open_prefixes = tuple(prefix for prefix, is_open in choices if is_open)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if not self.keys.enabled or details.method.startswith(self.open_prefixes) or handler is None:
            return handler
        metadata = dict(details.invocation_metadata or ())
        token = bearer_token(metadata.get("authorization"))
        if token is None:
            return refusal_handler(handler, StatusError(
                grpc.StatusCode.UNAUTHENTICATED, "an API key is required: send metadata 'authorization: Bearer KEY'", "API_KEY_MISSING"
            ))
        if not self.keys.valid(token):
            return refusal_handler(handler, StatusError(grpc.StatusCode.PERMISSION_DENIED, "the API key is not valid", "API_KEY_INVALID"))
        return handler


async def finish_reading(requests, first_wait_s: float = 1.0, quiet_s: float = 0.1, within_s: float = 1.0) -> None:  # noqa: ANN001
    """Read (and drop) what the client sends of a stream we refuse: the next message within `first_wait_s`, then
    until it closes its side, goes quiet for `quiet_s` (a client that waits for our answer before it writes more), or
    `within_s` has passed in all.

    Refusing a stream that the client is still writing ends it with a reset while the client's side is open, and the
    client (or a proxy between, HAProxy here) can report that reset instead of our status: "Internal error from Core",
    or CANCELLED with "Received RST_STREAM". A client that sends its messages and closes its side gets our status.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    stream = aiter(requests)
    wait = first_wait_s
    with contextlib.suppress(Exception):  # StopAsyncIteration (closed), TimeoutError (quiet), a broken stream
        while (left := deadline - loop.time()) > 0:
            await asyncio.wait_for(anext(stream), min(wait, left))
            wait = quiet_s


def refusal_handler(handler: grpc.RpcMethodHandler, error: StatusError) -> grpc.RpcMethodHandler:
    """A handler of the same shape that ends the call with `error` at once."""

    async def unary(request, context):  # noqa: ANN001
        await context.abort_with_status(error.to_status())

    async def streaming(request, context):  # noqa: ANN001
        if handler.request_streaming:
            await finish_reading(request)
        await context.abort_with_status(error.to_status())
        yield  # pragma: no cover - makes this an async generator

    codecs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streaming, **codecs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary, **codecs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streaming, **codecs)
    return grpc.unary_unary_rpc_method_handler(unary, **codecs)
