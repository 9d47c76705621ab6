"""The load tester behind `vocalis bench`: drive a server, time every stream, summarise.

Two ways to load a server:
- closed loop: C workers, each sending its next request as soon as the last ends,
  so C requests are always in flight (a sweep over C shows the throughput curve);
- open loop: requests arrive at a fixed mean rate (Poisson arrivals, seeded),
  whether or not earlier ones have finished, as independent users would.

Each request streams raw 16-bit PCM (over gRPC, or over HTTP from the gateway) and
is timed from its send: time to first audio (TTFA), end-to-end latency, and the
audio it carried, in seconds computed from the sample rate the server announced
(SessionStarted / X-Sample-Rate), never an assumed one. Playing the stream in real
time from its first byte is simulated to count underruns: moments when the next
audio arrives after the audio before it has finished playing.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

import httpx

from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import VocalisError
from vocalis.clients.messages import session_config
from vocalis.clients.prompts import Prompt

UNDERRUN_THRESHOLD_S = 0.010
"""A playback gap shorter than this is not counted as an underrun (scheduling jitter)."""


@dataclass
class RequestResult:
    """How one request went."""

    category: str
    """Prompt category ("short", "medium", "long", "file")."""
    words: int
    started_at: float = 0.0
    """When it was sent, in seconds from the start of its load level."""
    latency_s: float = 0.0
    """From send to the last byte of audio (or to the error)."""
    ttfa_s: float | None = None
    """From send to the first audio byte; None if no audio came."""
    audio_s: float = 0.0
    """Seconds of audio received, from the stream's real sample rate."""
    sample_rate: int = 0
    status: str = "OK"
    """"OK", a gRPC status name (e.g. "RESOURCE_EXHAUSTED"), "HTTP 429", or a transport error's name."""
    underruns: int = 0
    """Times real-time playback would have run dry."""
    stall_s: float = 0.0
    """Total time real-time playback would have waited for audio."""

    @property
    def ok(self) -> bool:
        return self.status == "OK"

    @property
    def rtf(self) -> float | None:
        """End-to-end latency divided by audio duration (below 1: faster than real time)."""
        return self.latency_s / self.audio_s if self.audio_s > 0 else None


class Playback:
    """Real-time playback of a stream that starts with its first audio; counts underruns."""

    def __init__(self, threshold_s: float = UNDERRUN_THRESHOLD_S) -> None:
        self.threshold_s = threshold_s
        self.play_end: float | None = None
        """When the audio received so far will have finished playing."""
        self.underruns = 0
        self.stall_s = 0.0

    def add(self, arrival_s: float, duration_s: float) -> None:
        """Audio of `duration_s` seconds arrived at `arrival_s` (any clock, in seconds)."""
        if duration_s <= 0:
            return
        if self.play_end is None:
            self.play_end = arrival_s + duration_s
            return
        gap = arrival_s - self.play_end
        if gap > self.threshold_s:
            self.underruns += 1
            self.stall_s += gap
        self.play_end = max(self.play_end, arrival_s) + duration_s


class _Stream:
    """The measurements of one request in flight."""

    def __init__(self, prompt: Prompt, threshold_s: float) -> None:
        self.result = RequestResult(prompt.category, prompt.words)
        self.start = time.perf_counter()
        self.playback = Playback(threshold_s)
        self.samples = 0
        self.odd_byte = 0

    def audio(self, num_samples: int) -> None:
        if num_samples <= 0:
            return
        now = time.perf_counter() - self.start
        if self.result.ttfa_s is None:
            self.result.ttfa_s = now
        self.samples += num_samples
        if self.result.sample_rate:
            self.playback.add(now, num_samples / self.result.sample_rate)

    def pcm_bytes(self, count: int) -> None:
        total = self.odd_byte + count
        self.odd_byte = total % 2
        self.audio(total // 2)

    def finish(self, status: str = "OK") -> RequestResult:
        result = self.result
        result.latency_s = time.perf_counter() - self.start
        result.status = status
        if result.sample_rate:
            result.audio_s = self.samples / result.sample_rate
        result.underruns = self.playback.underruns
        result.stall_s = self.playback.stall_s
        return result


class Target(Protocol):
    """A server endpoint the load tester can send one prompt to."""

    description: str

    async def request(self, prompt: Prompt) -> RequestResult: ...

    async def aclose(self) -> None: ...


class GrpcTarget:
    """Synthesizer.Synthesize over gRPC, streamed PCM."""

    def __init__(
        self,
        address: str,
        *,
        model: str = "",
        voice: str = "",
        api_key: str | None = None,
        timeout: float = 120.0,
        underrun_threshold_s: float = UNDERRUN_THRESHOLD_S,
    ) -> None:
        self.description = f"grpc://{address}"
        self.client = AsyncClient(address, timeout=timeout, api_key=api_key)
        self.config = session_config(model=model, voice=voice, format="pcm", stream=True)
        self.threshold_s = underrun_threshold_s

    async def request(self, prompt: Prompt) -> RequestResult:
        stream = _Stream(prompt, self.threshold_s)
        try:
            async for response in self.client.synthesize(self.config, prompt.text):
                kind = response.WhichOneof("response")
                if kind == "session_started":
                    stream.result.sample_rate = response.session_started.sample_rate
                elif kind == "audio":
                    chunk = response.audio
                    stream.audio(chunk.num_samples or len(chunk.audio) // 2)
        except VocalisError as error:
            return stream.finish(error.code.name)
        return stream.finish()

    async def aclose(self) -> None:
        await self.client.close()


class HttpTarget:
    """POST /v1/audio/speech on the gateway, raw PCM streamed (stream_format "audio")."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        voice: str = "",
        api_key: str | None = None,
        timeout: float = 120.0,
        underrun_threshold_s: float = UNDERRUN_THRESHOLD_S,
    ) -> None:
        self.description = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(
            base_url=self.description,
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
        )
        self.body: dict = {"response_format": "pcm", "stream_format": "audio"}
        if model:
            self.body["model"] = model
        if voice:
            self.body["voice"] = voice
        self.threshold_s = underrun_threshold_s

    async def request(self, prompt: Prompt) -> RequestResult:
        stream = _Stream(prompt, self.threshold_s)
        try:
            async with self.http.stream("POST", "/v1/audio/speech", json={**self.body, "input": prompt.text}) as response:
                if response.status_code != 200:
                    await response.aread()
                    return stream.finish(f"HTTP {response.status_code}")
                stream.result.sample_rate = int(response.headers.get("x-sample-rate", "0"))
                async for piece in response.aiter_raw():
                    stream.pcm_bytes(len(piece))
        except httpx.TimeoutException:
            return stream.finish("TIMEOUT")
        except httpx.HTTPError as error:
            return stream.finish(type(error).__name__)
        return stream.finish()

    async def aclose(self) -> None:
        await self.http.aclose()


@dataclass
class LevelResult:
    """One load level of a sweep and every request it sent."""

    mode: str
    """"closed" (fixed concurrency) or "open" (fixed arrival rate)."""
    load: float
    """Concurrency (closed) or requests per second (open)."""
    wall_s: float
    results: list[RequestResult] = field(default_factory=list)

    def summary(self) -> dict:
        ok = [r for r in self.results if r.ok]
        audio_s = sum(r.audio_s for r in ok)
        return {
            "mode": self.mode,
            "load": self.load,
            "requests": len(self.results),
            "ok": len(ok),
            "errors": dict(sorted(Counter(r.status for r in self.results if not r.ok).items())),
            "wall_s": self.wall_s,
            "ttfa_s": distribution([r.ttfa_s for r in ok if r.ttfa_s is not None]),
            "latency_s": distribution([r.latency_s for r in ok]),
            "rtf": distribution([r.rtf for r in ok if r.rtf is not None]),
            "audio_s": audio_s,
            "audio_s_per_s": audio_s / self.wall_s if self.wall_s > 0 else 0.0,
            "requests_per_s": len(ok) / self.wall_s if self.wall_s > 0 else 0.0,
            "underruns": sum(r.underruns for r in ok),
            "requests_with_underruns": sum(1 for r in ok if r.underruns),
            "max_stall_s": max((r.stall_s for r in ok), default=0.0),
            "sample_rates": sorted({r.sample_rate for r in ok if r.sample_rate}),
        }

    def to_dict(self) -> dict:
        return {**self.summary(), "results": [asdict(r) for r in self.results]}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation, as numpy's default."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99 and mean of `values` (None each when empty)."""
    if not values:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
    }


Progress = Callable[[RequestResult], None]
"""Called as each request finishes."""


async def closed_loop(
    target: Target, prompts: Sequence[Prompt], concurrency: int, requests: int, on_done: Progress | None = None
) -> LevelResult:
    """Send `requests` requests, `concurrency` at a time; prompts are taken in turn."""
    counter = itertools.count()
    level = LevelResult("closed", concurrency, 0.0)
    start = time.perf_counter()

    async def worker() -> None:
        while (i := next(counter)) < requests:
            sent = time.perf_counter() - start
            result = await target.request(prompts[i % len(prompts)])
            result.started_at = sent
            level.results.append(result)
            if on_done:
                on_done(result)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    level.wall_s = time.perf_counter() - start
    return level


def arrival_offsets(rate: float, count: int, seed: int = 0) -> list[float]:
    """Send times, in seconds from the start, of a Poisson process of `rate` per second: the first at 0."""
    arrivals = random.Random(seed)
    offsets = [0.0]
    while len(offsets) < count:
        offsets.append(offsets[-1] + arrivals.expovariate(rate))
    return offsets[:count]


async def open_loop(
    target: Target,
    prompts: Sequence[Prompt],
    rate: float,
    requests: int,
    *,
    seed: int = 0,
    on_done: Progress | None = None,
) -> LevelResult:
    """Send `requests` requests at Poisson arrivals of mean `rate` per second, never waiting for replies."""
    level = LevelResult("open", rate, 0.0)
    start = time.perf_counter()

    async def one(i: int) -> None:
        sent = time.perf_counter() - start
        result = await target.request(prompts[i % len(prompts)])
        result.started_at = sent
        level.results.append(result)
        if on_done:
            on_done(result)

    tasks = []
    for i, due in enumerate(arrival_offsets(rate, requests, seed)):
        await asyncio.sleep(max(0.0, start + due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    level.wall_s = time.perf_counter() - start
    return level


def default_requests(mode: str, load: float) -> int:
    """Requests per level when none is given: 4 per worker (closed) or 10 s of arrivals (open), at least 8."""
    return max(8, int(4 * load) if mode == "closed" else int(10 * load))


async def warm_up(target: Target, prompts: Sequence[Prompt], count: int) -> None:
    """Requests that load caches and connections before anything is timed; their results are dropped."""
    for i in range(count):
        await target.request(prompts[i % len(prompts)])
