"""uvicorn's h11 protocol with read deadlines, so that slow clients cannot hold connections open forever.

uvicorn (0.55) times out only idle keep-alive connections, and its keep-alive timer stops at the first
byte of the next request: a client that trickles a request head or body a byte at a time ("slowloris")
would hold its connection, and a slot of `limit_concurrency`, for as long as it likes. Here every
request must arrive whole within a deadline: its head within `head_timeout_s` of the connection (or of
the previous response), its body within `body_timeout_s` of the head (both set by `timed_h11`, from the
gateway's config). Past it the connection is closed;
an application waiting for the body sees a disconnect. WebSocket upgrades leave this protocol, and the
deadlines with it.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState


class TimedH11Protocol(H11Protocol):
    head_timeout_s: float
    body_timeout_s: float

    def __init__(self, config: Config, server_state: ServerState, app_state: dict, _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._read_deadline: asyncio.TimerHandle | None = None
        self._reading_body = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.transport.is_closing() or self.transport.get_protocol() is not self:  # closed, or upgraded to a WebSocket
            self._stop_deadline()
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY and not self._reading_body:
            self._reading_body = True
            self._arm(self.body_timeout_s)
        elif state is h11.DONE or state is h11.MUST_CLOSE or state is h11.CLOSED:
            self._stop_deadline()  # the request is in; the response may take as long as it takes

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()

    def _await_head(self) -> None:
        self._reading_body = False
        self._arm(self.head_timeout_s)

    def _arm(self, seconds: float) -> None:
        self._stop_deadline()
        self._read_deadline = self.loop.call_later(seconds, self._too_slow)

    def _stop_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _too_slow(self) -> None:
        self._read_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def timed_h11(head_timeout_s: float, body_timeout_s: float) -> type[TimedH11Protocol]:
    """The protocol class for uvicorn's `http=`, with these deadlines."""
    return type("TimedH11", (TimedH11Protocol,), {"head_timeout_s": head_timeout_s, "body_timeout_s": body_timeout_s})
