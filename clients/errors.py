"""Typed errors for callers of the Vocalis gRPC API."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


@dataclass
class FieldViolation:
    field: str
    description: str


@dataclass
class VocalisError(Exception):
    """A call that ended with a non-OK gRPC status, with its google.rpc details unpacked."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    """Stable reason from ErrorInfo, e.g. "UNKNOWN_VOICE"."""
    metadata: dict[str, str] = field(default_factory=dict)
    field_violations: list[FieldViolation] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    @property
    def field(self) -> str:
        """The first field at fault, or ""."""
        return self.field_violations[0].field if self.field_violations else ""


def from_rpc_error(error: grpc.RpcError) -> VocalisError:
    """Unpack a grpc (or grpc.aio) error into a VocalisError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    result = VocalisError(code=code, message=message or code.name)
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


def _status_of(error: grpc.RpcError):  # -> status_pb2.Status | None
    if isinstance(error, grpc.aio.AioRpcError):
        for key, value in error.trailing_metadata() or ():
            if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
                from google.rpc import status_pb2

                return status_pb2.Status.FromString(value)
        return None
    try:
        return rpc_status.from_call(error)  # type: ignore[arg-type]
    except (AttributeError, ValueError):
        return None
