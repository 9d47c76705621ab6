"""Health of the members of an upstream pool, kept as a proxy keeps it: checks with a fall and a rise.

Every `interval_s` each member's `vocalis.ready` probe is asked (timeout `timeout_s`); `fall` failed checks in a row
take a member out, `rise` passed ones bring it back (HAProxy's inter 1 s, timeout 1 s, fall 2, rise 2). A call that
fails before reaching its member (UNAVAILABLE: connection refused, a draining or starting replica) takes the member out
at once, without waiting for the checks; a voice store out of reach does not (the replica itself is fine).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import grpc

from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import VocalisError

log = logging.getLogger(__name__)

READY = "vocalis.ready"
STORE_AWAY = "VOICE_STORE_UNAVAILABLE"


def never_reached(error: VocalisError) -> bool:
    """The call did no work on its member: UNAVAILABLE comes before a server takes a call on (no connection, a refusal
    while starting or draining, the voice store away), so it may be made again on another member."""
    return error.code == grpc.StatusCode.UNAVAILABLE


class Member:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.up = True
        self._passed = 0
        self._failed = 0

    def checked(self, ok: bool, fall: int, rise: int) -> None:
        if ok:
            self._failed, self._passed = 0, self._passed + 1
            if not self.up and self._passed >= rise:
                self.up = True
                log.warning("gateway: upstream %s is back in its pool", self.client.target)
        else:
            self._passed, self._failed = 0, self._failed + 1
            if self.up and self._failed >= fall:
                self._down(f"failed {self._failed} health checks")

    def call_failed(self, error: VocalisError) -> None:
        if error.reason != STORE_AWAY:
            self._passed = 0
            if self.up:
                self._down(f"a call failed before reaching it ({error})")

    def _down(self, why: str) -> None:
        self.up = False
        log.warning("gateway: upstream %s taken out of its pool: %s", self.client.target, why)


class Watch:
    """The checks of every member, in one task of the serving event loop (started by the first request)."""

    def __init__(
        self, members: Sequence[Member], interval_s: float = 1.0, timeout_s: float = 1.0, fall: int = 2, rise: int = 2
    ) -> None:
        self.members = list(members)
        self.interval_s, self.timeout_s, self.fall, self.rise = interval_s, timeout_s, fall, rise
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-health")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.gather(*(self._check(member) for member in self.members))
            await asyncio.sleep(self.interval_s)

    async def _check(self, member: Member) -> None:
        try:
            ok, _ = await member.client.probe(READY, self.timeout_s)
        except VocalisError:
            return  # health wants a key (--closed-health) the gateway does not hold: calls still mark the member
        member.checked(ok, self.fall, self.rise)
