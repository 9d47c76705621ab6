"""Errors a model family raises about a request, independent of any transport.

The server maps them to gRPC status codes with google.rpc details; stages never
import the server or the proto.
"""

from __future__ import annotations


class RequestError(Exception):
    """A request the model cannot serve as asked; the caller must change it."""

    def __init__(self, field: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        """Request field at fault (proto/HTTP field name), or "" when none is."""
        self.reason = reason
        """Stable machine-readable reason, e.g. "FIELD_NOT_SUPPORTED"."""
        self.message = message
        """What is wrong and how to fix it, for people."""


class InvalidField(RequestError):
    """A field has a value the model cannot use (INVALID_ARGUMENT)."""


class UnknownVoice(RequestError):
    """The named voice does not exist for this model (NOT_FOUND)."""

    def __init__(self, voice: str, known: list[str]) -> None:
        super().__init__(
            "voice",
            "UNKNOWN_VOICE",
            f"unknown voice {voice!r}; this model has: {', '.join(known)}",
        )


class SynthesisFailed(Exception):
    """The model failed while producing audio for an otherwise valid request."""
