"""The longest value each string field of a SessionConfig may hold, checked before the field is used.

A name that is looked up (model, voice) or a value that ends in an error message would otherwise come back in
the status, and gRPC carries a status message in its trailing metadata, which a peer refuses above 16 KiB:
a 1 MB `voice` became a 413 "metadata size exceeds hard limit" instead of a 400 naming the field. The limits
are far above any real value and are documented in the proto beside each field.
"""

from __future__ import annotations

from vocalis.server.errors import invalid_argument
from vocalis.tts.v1 import synthesizer_pb2 as pb

MAX_CHARS: dict[str, int] = {
    "model": 256,
    "voice": 256,
    "language": 64,
    "request_id": 128,
    "instructions": 10_000,
    "ref_text": 10_000,
}
"""Characters (Unicode code points) each string field may hold; `ref_audio` is bounded by the message size."""
MAX_REFERENCE_TEXT_CHARS = MAX_CHARS["ref_text"]


def check(config: pb.SessionConfig) -> None:
    """INVALID_ARGUMENT (FIELD_TOO_LONG) naming the first field over its limit, and the limit; the value is not echoed."""
    for name, limit in MAX_CHARS.items():
        check_value(name, getattr(config, name), limit)
    for index, reference in enumerate(config.more_references):
        check_value(f"more_references[{index}].text", reference.text, MAX_REFERENCE_TEXT_CHARS)


def check_value(field: str, value: str, limit: int) -> None:
    """INVALID_ARGUMENT (FIELD_TOO_LONG) if `value` is longer than `limit` characters."""
    if len(value) > limit:
        raise invalid_argument(field, "FIELD_TOO_LONG", f"{field} is {len(value)} characters long; at most {limit} are allowed")
