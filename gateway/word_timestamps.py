"""Word times (gRPC WordTimings) as the HTTP and WebSocket faces write them.

Each word is `{"word", "start_ms", "end_ms"}` as vLLM-Omni writes it, plus `start_char` and
`end_char`: the half-open range of the word in the text the caller sent (Unicode code points,
across every piece of text of a WebSocket session).
"""

from __future__ import annotations

import json

from vocalis.tts.v1 import synthesizer_pb2 as pb

HEADER_LIMIT = 4096
"""Longest X-Word-Timestamps header value, in bytes, as vLLM-Omni caps it."""


def word_dicts(timings: pb.WordTimings, shift_ms: int = 0, shift_chars: int = 0) -> list[dict]:
    """The words of `timings`, their times less `shift_ms` and offsets less `shift_chars`."""
    return [
        {
            "word": w.word,
            "start_ms": w.start_ms - shift_ms,
            "end_ms": w.end_ms - shift_ms,
            "start_char": w.text_span.start - shift_chars,
            "end_char": w.text_span.end - shift_chars,
        }
        for w in timings.words
    ]


def word_timestamp_headers(words: list[dict]) -> dict[str, str]:
    """`X-Word-Timestamps` (a JSON list, ASCII-escaped), or `X-Word-Timestamps-Omitted` when it would pass 4 KiB."""
    value = json.dumps(words, separators=(",", ":"))  # ensure_ascii: a header carries ASCII only
    if len(value) > HEADER_LIMIT:
        return {"X-Word-Timestamps-Omitted": f"oversize; bytes={len(value)}; limit={HEADER_LIMIT}"}
    return {"X-Word-Timestamps": value}
