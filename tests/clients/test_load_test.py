"""The load tester's measurements and loops, against a stand-in target (no server)."""

from __future__ import annotations

import asyncio

import pytest

from vocalis.clients.load_test import (
    LevelResult,
    Playback,
    RequestResult,
    arrival_offsets,
    closed_loop,
    default_requests,
    distribution,
    open_loop,
    percentile,
)
from vocalis.clients.prompts import Prompt


def test_playback_that_keeps_up_has_no_underrun():
    playback = Playback()
    playback.add(0.10, 1.0)  # plays 0.10 .. 1.10
    playback.add(0.50, 1.0)  # arrived early: queued, plays 1.10 .. 2.10
    playback.add(2.105, 1.0)  # 5 ms late: jitter, not an underrun
    assert playback.underruns == 0 and playback.stall_s == 0


def test_playback_counts_each_dry_spell():
    playback = Playback(threshold_s=0.01)
    playback.add(0.0, 0.5)  # plays 0 .. 0.5
    playback.add(0.8, 0.5)  # 0.3 s late: plays 0.8 .. 1.3
    playback.add(1.0, 0.5)  # early: plays 1.3 .. 1.8
    playback.add(2.0, 0.5)  # 0.2 s late
    assert playback.underruns == 2
    assert playback.stall_s == pytest.approx(0.5)


def test_percentiles_interpolate_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    assert percentile([5.0], 99) == 5.0
    assert distribution([]) == {"p50": None, "p95": None, "p99": None, "mean": None}
    assert distribution(values)["mean"] == 2.5


def test_level_summary():
    level = LevelResult("closed", 2, wall_s=2.0, results=[
        RequestResult("short", 5, latency_s=0.5, ttfa_s=0.1, audio_s=2.0, sample_rate=22050),
        RequestResult("short", 5, latency_s=1.0, ttfa_s=0.3, audio_s=4.0, sample_rate=22050, underruns=1, stall_s=0.2),
        RequestResult("long", 200, latency_s=0.2, status="RESOURCE_EXHAUSTED"),
    ])
    s = level.summary()
    assert (s["requests"], s["ok"], s["errors"]) == (3, 2, {"RESOURCE_EXHAUSTED": 1})
    assert s["audio_s"] == 6.0 and s["audio_s_per_s"] == 3.0 and s["requests_per_s"] == 1.0
    assert s["ttfa_s"]["p50"] == pytest.approx(0.2) and s["latency_s"]["p50"] == pytest.approx(0.75)
    assert s["rtf"]["p50"] == pytest.approx(0.25)
    assert (s["underruns"], s["requests_with_underruns"], s["max_stall_s"]) == (1, 1, 0.2)
    assert s["sample_rates"] == [22050]
    assert len(level.to_dict()["results"]) == 3


class StandIn:
    """Answers each prompt after a short wait; counts how many requests are in flight."""

    description = "stand-in"

    def __init__(self, seconds: float = 0.02) -> None:
        self.seconds = seconds
        self.in_flight = 0
        self.most_in_flight = 0
        self.texts: list[str] = []

    async def request(self, prompt: Prompt) -> RequestResult:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.texts.append(prompt.text)
        await asyncio.sleep(self.seconds)
        self.in_flight -= 1
        return RequestResult(prompt.category, prompt.words, latency_s=self.seconds, ttfa_s=0.001, audio_s=1.0, sample_rate=16000)

    async def aclose(self) -> None:
        pass


PROMPTS = [Prompt("short", "one"), Prompt("short", "two"), Prompt("short", "three")]


async def test_closed_loop_holds_the_concurrency():
    target = StandIn()
    level = await closed_loop(target, PROMPTS, concurrency=3, requests=7)
    assert level.mode == "closed" and level.load == 3 and len(level.results) == 7
    assert target.most_in_flight == 3
    assert target.texts[:4] == ["one", "two", "three", "one"], "prompts are taken in turn"
    assert level.wall_s >= 0.02 * 3
    starts = sorted(r.started_at for r in level.results)
    # three go at once; each later one only when an earlier one (0.02 s) has answered
    assert starts[2] < 0.02 <= starts[3] + 0.005 and starts[-1] >= 0.02 * 2 - 0.005


async def test_open_loop_does_not_wait_for_replies():
    target = StandIn(seconds=0.3)
    done = []
    level = await open_loop(target, PROMPTS, rate=100.0, requests=6, on_done=done.append)
    assert level.mode == "open" and len(level.results) == 6 == len(done)
    assert target.most_in_flight == 6, "arrivals keep coming while earlier requests run"
    assert level.wall_s < 0.3 * 3


def test_open_loop_arrivals_are_poisson_and_seeded():
    offsets = arrival_offsets(rate=4.0, count=2000, seed=3)
    assert offsets == arrival_offsets(rate=4.0, count=2000, seed=3) != arrival_offsets(rate=4.0, count=2000, seed=4)
    assert offsets[0] == 0 and offsets == sorted(offsets)
    assert 1999 / offsets[-1] == pytest.approx(4.0, rel=0.1), "mean rate"
    assert arrival_offsets(1.0, 0) == []


def test_default_requests():
    assert default_requests("closed", 1) == 8 and default_requests("closed", 16) == 64
    assert default_requests("open", 0.5) == 8 and default_requests("open", 4) == 40
