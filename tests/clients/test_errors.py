"""Typed errors: each status code its own class, with the google.rpc details unpacked."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from vocalis.clients import errors
from vocalis.clients.errors import ERROR_TYPES, VocalisError, from_rpc_error


def aio_error(code: grpc.StatusCode, message: str, *details) -> grpc.aio.AioRpcError:
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    trailing = grpc.aio.Metadata((rpc_status.GRPC_DETAILS_METADATA_KEY, status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=message)


def test_every_non_ok_code_has_its_own_subclass():
    codes = [code for code in grpc.StatusCode if code is not grpc.StatusCode.OK]
    assert set(ERROR_TYPES) == set(codes)
    for code in codes:
        error = from_rpc_error(aio_error(code, "boom"))
        assert type(error) is ERROR_TYPES[code] and isinstance(error, VocalisError)
        assert error.code is code and str(error) == f"{code.name}: boom"


def test_details_are_unpacked():
    info = error_details_pb2.ErrorInfo(reason="UNKNOWN_VOICE", domain="vocalis", metadata={"voice": "nobody"})
    bad = error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field="config.voice", description="no such voice")]
    )
    error = from_rpc_error(aio_error(grpc.StatusCode.NOT_FOUND, "unknown voice 'nobody'", info, bad))
    assert isinstance(error, errors.NotFound)
    assert error.reason == "UNKNOWN_VOICE" and error.metadata == {"voice": "nobody"}
    assert error.field == "config.voice" and error.field_violations[0].description == "no such voice"
    assert error.describe().splitlines() == [
        "NOT_FOUND: unknown voice 'nobody'",
        "  reason: UNKNOWN_VOICE",
        "  field config.voice: no such voice",
    ]


def test_retry_after_comes_from_error_info():
    info = error_details_pb2.ErrorInfo(reason="QUEUE_FULL", metadata={"retry_after_s": "2"})
    error = from_rpc_error(aio_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "queue full", info))
    assert isinstance(error, errors.ResourceExhausted) and error.retry_after_s == 2.0
    assert from_rpc_error(aio_error(grpc.StatusCode.UNAVAILABLE, "down")).retry_after_s is None


def test_an_error_without_details_keeps_code_and_message():
    error = from_rpc_error(aio_error(grpc.StatusCode.DEADLINE_EXCEEDED, ""))
    assert isinstance(error, errors.DeadlineExceeded)
    assert error.message == "DEADLINE_EXCEEDED" and error.reason == "" and error.field == ""


def test_subclasses_can_be_raised_and_caught_as_the_base():
    with pytest.raises(VocalisError) as caught:
        raise errors.InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, "bad speed")
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
