"""A queue of WebSocket frames bounded by bytes: when it is full, the reader stops reading the socket.

Not reading is the backpressure: the WebSocket library's own small queue fills, then the kernel's
buffers, then the client's sends block. A frame larger than any message may be is replaced by a
small `Oversize` note before it is queued, so its payload is dropped at once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

ENTRY_BYTES = 1024
"""What every entry counts for besides its payload, so that a flood of tiny or refused frames is bounded too."""


@dataclass(frozen=True)
class Oversize:
    """A frame that was too large to queue; only its size is kept."""

    size: int


def frame_size(message: dict[str, Any]) -> int:
    """The payload of an ASGI websocket.receive message, in bytes (text counted at one byte per character, its minimum)."""
    if message.get("bytes") is not None:
        return len(message["bytes"])
    return len(message.get("text") or "")


class Inbox:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: deque[tuple[Any, int]] = deque()
        self._changed = asyncio.Event()

    async def put(self, item: Any, size: int = 0) -> None:
        """Queue `item`, first waiting while the inbox is full (an empty inbox takes anything)."""
        cost = size + ENTRY_BYTES
        while self._items and self.bytes + cost > self.max_bytes:
            self._changed.clear()
            await self._changed.wait()
        self.put_nowait(item, size)

    def put_nowait(self, item: Any, size: int = 0) -> None:
        """Queue `item` whatever the bound (for the few control notes that must never wait)."""
        self._items.append((item, size + ENTRY_BYTES))
        self.bytes += size + ENTRY_BYTES
        self._changed.set()

    async def get(self) -> Any:
        while not self._items:
            self._changed.clear()
            await self._changed.wait()
        item, cost = self._items.popleft()
        self.bytes -= cost
        self._changed.set()
        return item
