"""One WebSocket speech session (/v1/audio/speech/stream) as the e2e tests drive it: send session.config, the text
as input.text messages and input.done, then read every frame until session.done (or another event type)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from websockets.sync.client import ClientConnection, connect

STREAM_PATH = "/v1/audio/speech/stream"

Frame = dict[str, Any] | bytes
"""A JSON event (decoded) or a binary audio frame."""


def receive(ws: ClientConnection, until: Iterable[str] = ("session.done",), timeout: float = 120) -> list[Frame]:
    """Frames up to and including the first event whose type is in `until`."""
    stop = set(until)
    frames: list[Frame] = []
    while not (frames and isinstance(frames[-1], dict) and frames[-1].get("type") in stop):
        frame = ws.recv(timeout=timeout)
        frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
    return frames


def ws_session(server: Any, config: dict[str, Any], texts: str | Iterable[str], *, timeout: float = 120,
               until: Iterable[str] = ("session.done",), refuse_errors: bool = False, max_size: int | None = 2**20) -> list[Frame]:
    """Every frame of one session on `server` (a RunningServer, or a ws:// URL): `config` as session.config (its
    "type" added), each of `texts` as input.text, input.done; read until an event of `until`. refuse_errors: an
    error event ends the session and fails the test (with the event)."""
    url = server if isinstance(server, str) else f"ws://127.0.0.1:{server.http_port}{STREAM_PATH}"
    with connect(url, max_size=max_size) as ws:
        ws.send(json.dumps({"type": "session.config", **config}))
        for text in [texts] if isinstance(texts, str) else texts:
            ws.send(json.dumps({"type": "input.text", "text": text}))
        ws.send(json.dumps({"type": "input.done"}))
        frames = receive(ws, (*until, "error") if refuse_errors else until, timeout)
    if refuse_errors:
        errors = events(frames, "error")
        assert not errors, errors
    return frames


def audio(frames: list[Frame]) -> bytes:
    """The binary frames joined."""
    return b"".join(frame for frame in frames if isinstance(frame, bytes))


def events(frames: list[Frame], kind: str | None = None) -> list[dict[str, Any]]:
    """The JSON events (of type `kind`, if given)."""
    return [frame for frame in frames if isinstance(frame, dict) and (kind is None or frame.get("type") == kind)]
