"""finish_reading: a refused stream is read until the client closes its side, not just its first message, so the
call ends on our status rather than on a reset of a stream still open (CANCELLED through HAProxy, seen in CI)."""

from __future__ import annotations

import asyncio

from vocalis.server.auth import finish_reading


def _stream(gaps: list[float], closes: bool, read: list[int]):
    async def messages():
        for index, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            read.append(index)
            yield index
        if not closes:
            await asyncio.sleep(3600)
    return messages()


async def test_reads_every_message_sent_at_once_until_the_client_closes():
    read: list[int] = []
    await finish_reading(_stream([0.0, 0.0, 0.01], closes=True, read=read), first_wait_s=0.1)
    assert read == [0, 1, 2]


async def test_stops_when_a_client_that_waits_for_an_answer_goes_quiet():
    read: list[int] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    await finish_reading(_stream([0.0], closes=False, read=read), first_wait_s=0.1, quiet_s=0.1, within_s=5.0)
    assert read == [0] and loop.time() - start < 1.0


async def test_waits_longer_for_the_first_message_and_never_past_the_bound():
    read: list[int] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    await finish_reading(_stream([0.3] + [0.05] * 100, closes=True, read=read), first_wait_s=1.0, quiet_s=0.1, within_s=1.0)
    assert read[0] == 0 and len(read) < 101 and loop.time() - start < 1.5
