"""Typed errors for callers of the Vocalis gRPC API.

Every non-OK status becomes a VocalisError carrying the status code, the stable
`ErrorInfo.reason` and the `BadRequest` field violations the server attached. Each
canonical code has its own subclass (NotFound, InvalidArgument, ResourceExhausted,
...), so a caller can catch exactly what it can handle and let the rest through:

    try:
        client.synthesize(config, text)
    except ResourceExhausted as error:
        time.sleep(error.retry_after_s or 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


@dataclass
class FieldViolation:
    field: str
    """The request field at fault, as a proto field path (e.g. "config.voice")."""
    description: str
    """What is wrong with it."""


@dataclass
class VocalisError(Exception):
    """A call that ended with a non-OK gRPC status, with its google.rpc details unpacked."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    """Stable reason from ErrorInfo, e.g. "UNKNOWN_VOICE"."""
    metadata: dict[str, str] = field(default_factory=dict)
    """ErrorInfo metadata, e.g. {"retry_after_s": "1"}."""
    field_violations: list[FieldViolation] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    @property
    def field(self) -> str:
        """The first field at fault, or ""."""
        return self.field_violations[0].field if self.field_violations else ""

    @property
    def retry_after_s(self) -> float | None:
        """How long the server asked the caller to wait before retrying, if it said."""
        value = self.metadata.get("retry_after_s")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None

    def describe(self) -> str:
        """A multi-line account for people: status, message, reason and each field at fault."""
        lines = [str(self)]
        if self.reason:
            lines.append(f"  reason: {self.reason}")
        lines += [f"  field {v.field}: {v.description}" for v in self.field_violations]
        return "\n".join(lines)


class Cancelled(VocalisError):
    """CANCELLED: the call was cancelled (usually by the caller)."""


class Unknown(VocalisError):
    """UNKNOWN: an error the server did not classify."""


class InvalidArgument(VocalisError):
    """INVALID_ARGUMENT: a bad request; `field_violations` names the fields."""


class DeadlineExceeded(VocalisError):
    """DEADLINE_EXCEEDED: the call's deadline passed before it finished."""


class NotFound(VocalisError):
    """NOT_FOUND: an unknown model or voice."""


class AlreadyExists(VocalisError):
    """ALREADY_EXISTS: e.g. a voice name that is taken."""


class PermissionDenied(VocalisError):
    """PERMISSION_DENIED: the API key may not do this."""


class ResourceExhausted(VocalisError):
    """RESOURCE_EXHAUSTED: the server's queue is full; retry after `retry_after_s`."""


class FailedPrecondition(VocalisError):
    """FAILED_PRECONDITION: a message out of order (e.g. text before config)."""


class Aborted(VocalisError):
    """ABORTED: a conflict with a concurrent change."""


class OutOfRange(VocalisError):
    """OUT_OF_RANGE: a value past a limit."""


class Unimplemented(VocalisError):
    """UNIMPLEMENTED: the server does not offer this call (yet)."""


class Internal(VocalisError):
    """INTERNAL: the server failed; the request may be retried."""


class Unavailable(VocalisError):
    """UNAVAILABLE: the server is unreachable, starting or draining."""


class DataLoss(VocalisError):
    """DATA_LOSS: unrecoverable data loss."""


class Unauthenticated(VocalisError):
    """UNAUTHENTICATED: a missing or invalid API key."""


ERROR_TYPES: dict[grpc.StatusCode, type[VocalisError]] = {
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNKNOWN: Unknown,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}
"""The VocalisError subclass raised for each non-OK status code."""


def from_rpc_error(error: grpc.RpcError) -> VocalisError:
    """Unpack a grpc (or grpc.aio) error into the VocalisError subclass of its status code."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    result = ERROR_TYPES.get(code, VocalisError)(code=code, message=message or code.name)
    status = _status_of(error)
    if status is None:
        return result
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            result.reason = info.reason
            result.metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            result.field_violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
    return result


def _status_of(error: grpc.RpcError) -> status_pb2.Status | None:
    if isinstance(error, grpc.aio.AioRpcError):
        for key, value in error.trailing_metadata() or ():
            if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
                return status_pb2.Status.FromString(value)
        return None
    try:
        return rpc_status.from_call(error)  # type: ignore[arg-type]
    except (AttributeError, ValueError):
        return None
