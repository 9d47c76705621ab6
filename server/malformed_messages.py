"""Requests whose bytes do not parse as their message become INVALID_ARGUMENT, not INTERNAL with a traceback.

grpc parses each request with the handler's deserializer and, when it raises, logs the error and
fails the call with INTERNAL (or UNKNOWN). This interceptor, innermost, gives every handler a
deserializer that cannot raise: a message that does not parse becomes a `Malformed` marker, and the
handler refuses it by name when it reaches it (for a stream, where it is in the stream).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from vocalis.server.errors import StatusError, invalid_argument


@dataclass(frozen=True)
class Malformed:
    """A request message that did not parse."""

    why: str

    def error(self) -> StatusError:
        return invalid_argument("", "MALFORMED_MESSAGE", f"the request message does not parse: {self.why}")


def tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, ValueError, RecursionError) as error:
            return Malformed(str(error) or type(error).__name__)

    return parse


async def checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """`requests`, raising the StatusError of the first malformed one (the servicers report StatusErrors)."""
    async for request in requests:
        if isinstance(request, Malformed):
            raise request.error()
        yield request


class MalformedMessageInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, details):  # noqa: ANN001, ANN201
        handler = await continuation(details)
        if handler is None or handler.request_deserializer is None:
            return handler
        codecs = {"request_deserializer": tolerant(handler.request_deserializer), "response_serializer": handler.response_serializer}
        if handler.request_streaming:
            inner = handler.stream_stream if handler.response_streaming else handler.stream_unary
            make = grpc.stream_stream_rpc_method_handler if handler.response_streaming else grpc.stream_unary_rpc_method_handler
            return make(_wrapped(inner, lambda requests: (checked(requests), None)), **codecs)
        inner = handler.unary_stream if handler.response_streaming else handler.unary_unary
        make = grpc.unary_stream_rpc_method_handler if handler.response_streaming else grpc.unary_unary_rpc_method_handler
        return make(_wrapped(inner, lambda request: (request, request if isinstance(request, Malformed) else None)), **codecs)


def _wrapped(inner: Callable[..., Any], check: Callable[[Any], tuple[Any, Malformed | None]]) -> Callable[..., Any]:
    """`inner` of the same kind (async generator, coroutine or plain function), refusing a malformed request first."""
    if inspect.isasyncgenfunction(inner):

        async def generator(request, context):  # noqa: ANN001, ANN202
            request, malformed = check(request)
            if malformed is not None:
                await context.abort_with_status(malformed.error().to_status())
            async for response in inner(request, context):
                yield response

        return generator

    async def coroutine(request, context):  # noqa: ANN001, ANN202
        request, malformed = check(request)
        if malformed is not None:
            await context.abort_with_status(malformed.error().to_status())
        result = inner(request, context)
        return await result if inspect.isawaitable(result) else result

    return coroutine
