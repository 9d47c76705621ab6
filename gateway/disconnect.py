"""An answer that stops when its HTTP client goes away before the response begins.

Starlette cancels a StreamingResponse whose client leaves, but not the wait before a response starts: without
this, an abandoned non-streaming request (a whole file, a batch) would synthesize to its end for nobody and hold
the server's queue meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import Request

T = TypeVar("T")


class ClientGone(Exception):
    """The HTTP client disconnected before the response began."""


async def unless_disconnected(request: Request, answer: Coroutine[Any, Any, T]) -> T:
    """`answer`'s result, or ClientGone (with `answer` cancelled, and so every gRPC call it holds) if the client
    goes away first."""
    answering = asyncio.ensure_future(answer)
    leaving = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({answering, leaving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        leaving.cancel()
        if not answering.done():
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
    if answering.cancelled():
        raise ClientGone
    return answering.result()


async def _disconnected(request: Request) -> None:
    with contextlib.suppress(Exception):  # a receive channel that fails is a client that is gone
        while (await request.receive())["type"] != "http.disconnect":
            pass
