"""Whether the server takes new sessions: starting, serving, draining, stopping; and how many run per key.

One interceptor sees every call. Before the model is warmed up and once a drain has
closed the door (STOPPING), new calls (other than health, reflection and metrics) get UNAVAILABLE
at once; while serving, and in the first step of a drain (DRAINING: not ready, so the proxies
stop sending, but what they still send is served), a key may hold at most `max_sessions_per_key`
Synthesize sessions. It also counts the sessions in flight, so a drain can wait for them to finish.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Callable

import grpc

from vocalis.server.auth import bearer_token, finish_reading, refusal_handler
from vocalis.server.errors import StatusError

SYNTHESIZE = "/vocalis.tts.v1.Synthesizer/Synthesize"
_ALWAYS_OPEN = ("/grpc.health.", "/grpc.reflection.", "/vocalis.tts.v1.Metrics/")
"""Answered while starting and draining too: a drain is exactly when an operator wants to see the metrics."""


class State(enum.Enum):
    STARTING = "starting"
    SERVING = "serving"
    DRAINING = "draining"
    """Not ready (probes say NOT_SERVING) but still admitting: the proxies are noticing."""
    STOPPING = "stopping"
    """New work refused; running work finishing."""


class Lifecycle:
    def __init__(
        self, max_sessions_per_key: int = 0, retry_after_s: int = 1, on_idle: Callable[[], None] | None = None
    ) -> None:
        self.state = State.STARTING
        self.max_sessions_per_key = max_sessions_per_key
        """0: no limit."""
        self.retry_after_s = retry_after_s
        self.sessions: Counter[str] = Counter()
        self._idle = asyncio.Event()
        self._idle.set()
        self.on_idle = on_idle
        """Called on the event loop when the last session has ended (the heap trimmer)."""

    @property
    def in_flight(self) -> int:
        return sum(self.sessions.values())

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no session runs (True) or `timeout` passes (False)."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def _refusal(self) -> StatusError | None:
        if self.state is State.STARTING:
            return StatusError(grpc.StatusCode.UNAVAILABLE, "the server is starting: the model is loading", "STARTING",
                               metadata={"retry_after_s": str(self.retry_after_s)})
        if self.state is State.STOPPING:
            return StatusError(grpc.StatusCode.UNAVAILABLE, "the server is shutting down; use another replica", "DRAINING",
                               metadata={"retry_after_s": str(self.retry_after_s)})
        return None

    def _enter(self, key: str) -> None:
        self.sessions[key] += 1
        self._idle.clear()

    def _leave(self, key: str) -> None:
        self.sessions[key] -= 1
        if self.sessions[key] <= 0:
            del self.sessions[key]
        if not self.sessions:
            self._idle.set()
            if self.on_idle is not None:
                self.on_idle()


class LifecycleInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, lifecycle: Lifecycle) -> None:
        self.lifecycle = lifecycle

    async def intercept_service(self, continuation, details):  # noqa: ANN001, ANN201
        handler = await continuation(details)
        if handler is None or details.method.startswith(_ALWAYS_OPEN):
            return handler
        lifecycle = self.lifecycle
        refusal = lifecycle._refusal()
        if details.method != SYNTHESIZE:
            return handler if refusal is None else refusal_handler(handler, refusal)
        key = bearer_token(dict(details.invocation_metadata or ()).get("authorization")) or ""
        inner = handler.stream_stream

        async def session(requests, context):  # noqa: ANN001
            error = lifecycle._refusal()
            if error is None and lifecycle.max_sessions_per_key and lifecycle.sessions[key] >= lifecycle.max_sessions_per_key:
                error = StatusError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"this key already has {lifecycle.max_sessions_per_key} sessions open; close one first",
                    "TOO_MANY_SESSIONS",
                    metadata={"retry_after_s": str(lifecycle.retry_after_s)},
                )
            if error is not None:
                await finish_reading(requests)
                await context.abort_with_status(error.to_status())
            lifecycle._enter(key)
            try:
                async for response in inner(requests, context):
                    yield response
            finally:
                lifecycle._leave(key)

        return grpc.stream_stream_rpc_method_handler(
            session, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


