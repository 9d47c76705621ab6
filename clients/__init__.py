"""Python client library (sync and async) and the client-side commands of the `vocalis` CLI.

    from vocalis.clients import Client, session_config

    with Client("localhost:50051", timeout=60, api_key="...") as client:
        client.synthesize_to_file("Hello there.", "hello.wav")
"""

from vocalis.clients.aio import AsyncClient, AsyncTextSession
from vocalis.clients.errors import ERROR_TYPES, FieldViolation, VocalisError
from vocalis.clients.messages import FORMATS, session_config, voice_request
from vocalis.clients.sync import Client, SynthesisResult, TextSession

__all__ = [
    "ERROR_TYPES",
    "FORMATS",
    "AsyncClient",
    "AsyncTextSession",
    "Client",
    "FieldViolation",
    "SynthesisResult",
    "TextSession",
    "VocalisError",
    "session_config",
    "voice_request",
]
