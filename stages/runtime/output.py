"""A one-way audio stream from a stage thread into an asyncio consumer.

Stage workers run on their own threads; the server's gRPC handlers run on the
event loop. This is the only bridge between them, and it never busy-waits: the
producer schedules items onto the loop with call_soon_threadsafe. A worker that
delivers the outputs of a whole step wraps them in `batched_delivery()`, so the
loop is woken once per step rather than once per request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from vocalis.stages.text.word_times import UntimedWord, WordTime

_END = object()


@dataclass(frozen=True)
class WordTimes:
    """Times of some words of the utterance, as they travel between its audio chunks."""

    words: tuple[WordTime, ...]
    untimed: tuple[UntimedWord, ...] = ()
    """Words the stage could not time, with the reason."""

_pending = threading.local()


class AudioOutput:
    """Float32 audio chunks (and, when asked for, WordTimes) pushed from any thread, read with `async for` on one loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._closed = False

    def put_audio(self, samples: np.ndarray) -> None:
        self._push(np.asarray(samples, dtype=np.float32))

    def put_words(self, words: list[WordTime], untimed: list[UntimedWord] | None = None) -> None:
        """Word times (and the words that could not be timed), read by the consumer as a WordTimes item between the
        audio chunks."""
        self._push(WordTimes(tuple(words), tuple(untimed or ())))

    def close(self, error: BaseException | None = None) -> None:
        """End the stream; with an error, the reader raises it after the audio before it."""
        if self._closed:
            return
        self._closed = True
        if error is not None:
            self._push(error)
        self._push(_END)

    def _push(self, item: object) -> None:
        batch = getattr(_pending, "items", None)
        if batch is not None:
            batch.append((self, item))
            return
        _schedule(self._loop, [(self, item)])

    async def __aiter__(self) -> AsyncIterator[np.ndarray | WordTimes]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]


@contextmanager
def batched_delivery() -> Iterator[None]:
    """Within the block, this thread's pushes are held and then scheduled with one call per event loop."""
    _pending.items = []
    try:
        yield
    finally:
        items, _pending.items = _pending.items, None
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[AudioOutput, object]]] = {}
        for output, item in items:
            by_loop.setdefault(output._loop, []).append((output, item))
        for loop, group in by_loop.items():
            _schedule(loop, group)


def _schedule(loop: asyncio.AbstractEventLoop, items: list[tuple[AudioOutput, object]]) -> None:
    try:
        loop.call_soon_threadsafe(_deliver, items)
    except RuntimeError:
        pass  # the loop is gone: nobody is listening any more


def _deliver(items: list[tuple[AudioOutput, object]]) -> None:
    for output, item in items:
        output._queue.put_nowait(item)
