"""A one-way audio stream from a stage thread into an asyncio consumer.

Stage workers run on their own threads; the server's gRPC handlers run on the
event loop. This is the only bridge between them, and it never busy-waits: the
producer schedules each item onto the loop with call_soon_threadsafe.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np

_END = object()


class AudioOutput:
    """Float32 audio chunks pushed from any thread, read with `async for` on one loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._closed = False

    def put_audio(self, samples: np.ndarray) -> None:
        self._push(np.asarray(samples, dtype=np.float32))

    def close(self, error: BaseException | None = None) -> None:
        """End the stream; with an error, the reader raises it after the audio before it."""
        if self._closed:
            return
        self._closed = True
        if error is not None:
            self._push(error)
        self._push(_END)

    def _push(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            pass  # the loop is gone: nobody is listening any more

    async def __aiter__(self) -> AsyncIterator[np.ndarray]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
