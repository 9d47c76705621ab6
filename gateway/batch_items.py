"""Refuse a batch with too many items before its body is parsed.

FastAPI parses a whole JSON body into Python objects before a route sees it: a 10 MB batch of a million tiny
items cost +770 MiB of memory before the route could count them and answer 400. This middleware reads the
body of POST /v1/audio/speech/batch (already bounded by --max-body-bytes) and scans only its structure, in
a regular expression's C loop, stopping as soon as the top-level `items` array holds more elements than the
batch may; a body within the cap goes on to the route unchanged.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vocalis.gateway.errors import error_body

BATCH_PATH = "/v1/audio/speech/batch"
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')
"""What the scan reads of JSON: whole strings (skipped in one step) and structural characters; numbers and
literals are not tokens, since only commas tell elements apart."""


def more_items_than(body: bytes, limit: int) -> bool:
    """Whether the top-level object's `items` array in JSON `body` holds more than `limit` elements, read no further
    than the element past the limit. Malformed JSON is left to the parser (False unless it plainly has too many)."""
    depth = 0
    previous = b""
    key = None
    items_depth = 0
    commas = 0
    for match in _TOKENS.finditer(body):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
            if token == b"[" and depth == 2 and previous == b":" and key == "items":
                items_depth, commas = depth, 0
        elif token in (b"}", b"]"):
            if depth == items_depth:
                items_depth = 0
            depth -= 1
        elif token == b",":
            if depth == items_depth and items_depth:
                commas += 1
                if commas >= limit:  # n elements have n - 1 commas
                    return True
        elif token == b":":
            if depth == 1 and previous.startswith(b'"'):
                key = _key(previous)
        previous = token
    return False


def _key(token: bytes) -> str | None:
    try:
        return json.loads(token)
    except ValueError:
        return None


class BatchItemCap:
    """Answers POST /v1/audio/speech/batch with 400 TOO_MANY_ITEMS when its body holds more than `max_items` items,
    before the body is parsed; other requests pass untouched."""

    def __init__(self, app: ASGIApp, max_items: int) -> None:
        self.app = app
        self.max_items = max_items

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != BATCH_PATH:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([], message, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        chunks.clear()
        if more_items_than(body, self.max_items):
            message = f"items: a batch holds at most {self.max_items} items, got more; split it"
            content = json.dumps(error_body(400, message, "items", "TOO_MANY_ITEMS")).encode()
            await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": content})
            return
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], None, receive), send)


def _replay(first: list[Message], ending: Message | None, receive: Receive) -> Receive:
    """A receive that gives `first` (the body read), then `ending` if one came instead of the body, then the
    connection's own messages (its disconnect, which a route watches for)."""
    pending = [*first, *([ending] if ending is not None else [])]

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
