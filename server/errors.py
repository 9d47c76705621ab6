"""gRPC errors with google.rpc details, raised where a fault is found.

Every request error leaves the server as a canonical status code, a message that
says what to fix, an ErrorInfo with a stable reason, and, when one field is at
fault, a BadRequest.FieldViolation naming it. The gateway maps these to HTTP once.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from vocalis.stages.api.errors import RequestError, UnknownVoice

ERROR_DOMAIN = "vocalis.tts.v1"


class StatusError(Exception):
    """A failure to report to the caller as a gRPC status."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str,
        field: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.field = field
        self.metadata = metadata or {}

    def to_status(self) -> grpc.Status:
        """The status to send: its message and details bounded, since gRPC carries them in trailing metadata, which
        a peer refuses above 16 KiB (a caller's value quoted in a message must not turn a 400 into a broken stream)."""
        message = bounded(self.message)
        details = []
        metadata = {bounded(key): bounded(value) for key, value in self.metadata.items()}
        info = error_details_pb2.ErrorInfo(reason=self.reason, domain=ERROR_DOMAIN, metadata=metadata)
        details.append(_pack(info))
        if self.field:
            violation = error_details_pb2.BadRequest.FieldViolation(field=bounded(self.field), description=message)
            details.append(_pack(error_details_pb2.BadRequest(field_violations=[violation])))
        proto = status_pb2.Status(code=_CODES[self.code], message=message, details=details)
        return rpc_status.to_status(proto)


MAX_STATUS_TEXT_CHARS = 1024
"""Longest message (or detail) a status carries: sent twice (message and BadRequest), percent-encoded or base64,
it stays well within gRPC's 8 KiB default metadata budget."""


def bounded(text: str) -> str:
    """`text`, cut to MAX_STATUS_TEXT_CHARS with a note of its full length."""
    if len(text) <= MAX_STATUS_TEXT_CHARS:
        return text
    return f"{text[: MAX_STATUS_TEXT_CHARS - 40]}... ({len(text)} characters in all)"


def invalid_argument(field: str, reason: str, message: str) -> StatusError:
    return StatusError(grpc.StatusCode.INVALID_ARGUMENT, message, reason, field)


def from_request_error(error: RequestError) -> StatusError:
    code = grpc.StatusCode.NOT_FOUND if isinstance(error, UnknownVoice) else grpc.StatusCode.INVALID_ARGUMENT
    return StatusError(code, error.message, error.reason, error.field)


async def abort(context: grpc.aio.ServicerContext, error: StatusError) -> None:
    """End the call with `error`; raises, as grpc.aio's abort does."""
    await context.abort_with_status(error.to_status())


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


_CODES = {code: getattr(code_pb2, code.name) for code in grpc.StatusCode}
