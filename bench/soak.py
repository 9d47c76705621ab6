"""Soak and faults: many clients for minutes, with cancellations, disconnects, slow readers and bad input.

Starts `vocalis serve` (the Piper voice) on loopback, learns the exact PCM length of
each prompt (noise scales 0 make it deterministic), then runs `--concurrency` clients
over gRPC and HTTP for `--warmup` seconds, then `--duration` seconds more (the long units,
when mixed in, are sent once before). Every completed response must have exactly the expected
length (else it counts as corrupted); errors are counted by kind. The memory trend is the
server's RSS at rest (no request in flight) after the measured load against its RSS at rest
after the warm-up: what a leak leaves behind, without the swings of the requests in flight
(a long unit's runs hold a few hundred MB while they last). The RSS under load is sampled
every second for the JSON. Prints a table, writes JSON.

Mixed in (`--attacks`, default all) are the inputs of the attack corpus (tests/fuzz/corpus.py):
texts that crashed espeak-ng (`crash`), units with nowhere to split (`long`), flush ids of 1 MB
that a client never reads the answers of (`flush`), and bodies a client gets a 4xx for (`body`).
Each must end in its own request only: any clean status is fine, but a dead server, a broken
connection or a 5xx for a client's fault counts as unexpected.

    python bench/soak.py --duration 600 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.proc_status import status_kib  # noqa: E402
from bench.report import write_json  # noqa: E402
from tests.fuzz import corpus  # noqa: E402
from tests.serving import start_server  # noqa: E402
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

PROMPTS = [
    "Hello there.",
    "The weather today is mild, with a light breeze from the west.",
    "Please remember to bring your umbrella. It may rain later this afternoon, and the buses are often late.",
    "One. Two. Three. Four. Five.",
]
NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}
ACTIONS = [("complete", 0.65), ("cancel", 0.10), ("disconnect", 0.05), ("slow_reader", 0.12), ("oversize", 0.08)]
ATTACKS = {"crash": 0.02, "long": 0.01, "flush": 0.03, "body": 0.03}
"""Weights of the attack inputs mixed in (see the module docstring)."""
SMALL_BODIES = [(body, status) for body, status in corpus.HTTP_BODIES if len(body) < 1_000_000]


def config() -> pb.SessionConfig:
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM)
    message.extra_params.update(NOISELESS)
    return message


def requests(text: str) -> list[pb.SynthesizeRequest]:
    return [pb.SynthesizeRequest(config=config()), pb.SynthesizeRequest(text=pb.TextInput(text=text))]


async def grpc_pcm(stub, text: str, action: str, rng: random.Random, timeout: float = 120) -> bytes | None:
    call = stub.Synthesize(iter(requests(text)), timeout=timeout)
    audio = bytearray()
    async for response in call:
        if response.WhichOneof("response") != "audio":
            continue
        audio += response.audio.audio
        if action in ("cancel", "disconnect"):
            call.cancel()
            return None
        if action == "slow_reader":
            await asyncio.sleep(rng.uniform(0.05, 0.3))
    return bytes(audio)


async def http_pcm(http: httpx.AsyncClient, text: str, action: str, rng: random.Random) -> bytes | None:
    body = {"input": text, "response_format": "pcm", "stream_format": "audio", "extra_params": NOISELESS}
    async with http.stream("POST", "/v1/audio/speech", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            raise httpx.HTTPStatusError(str(response.status_code), request=response.request, response=response)
        audio = bytearray()
        async for chunk in response.aiter_raw():
            audio += chunk
            if action in ("cancel", "disconnect"):
                return None  # leaving the block closes the connection mid-stream
            if action == "slow_reader":
                await asyncio.sleep(rng.uniform(0.05, 0.3))
        return bytes(audio)


async def attack(kind: str, protocol: str, stub, http: httpx.AsyncClient, rng: random.Random, capped: bool = False) -> str:
    """One attack input; the outcome's name, ending in ":unexpected" when a healthy server would not answer so. With
    `capped` (the server's --max-audio-seconds under a long unit's audio) a long or crash text may end at the cap:
    gRPC RESOURCE_EXHAUSTED, HTTP 413 before the first bytes, or a streamed body cut short after them (the documented
    outcome: no room for a status)."""
    if kind == "body":
        body, status = rng.choice(SMALL_BODIES)
        response = await http.post("/v1/audio/speech", content=body, headers={"content-type": "application/json"})
        return f"attack:body:{response.status_code}" + ("" if response.status_code == status else ":unexpected")
    if kind == "flush":
        messages = [*requests("A sentence that is never read."), pb.SynthesizeRequest(flush=pb.Flush(flush_id="f" * 1_000_000))]
        try:
            async for _ in stub.Synthesize(iter(messages), timeout=120):
                pass
        except grpc.aio.AioRpcError as error:
            return f"attack:flush:{error.code().name}" + ("" if error.code() == grpc.StatusCode.INVALID_ARGUMENT else ":unexpected")
        return "attack:flush:accepted:unexpected"
    text = rng.choice(corpus.CRASH_TEXTS if kind == "crash" else corpus.LONG_UNITS)
    if protocol == "grpc":
        try:
            # A long unit is minutes of audio ("漢" * 300: 197 s), which a loaded server streams at playback pace.
            await grpc_pcm(stub, text, "complete", rng, timeout=600)
        except grpc.aio.AioRpcError as error:
            clean = error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED)
            return f"attack:{kind}:{error.code().name}" + ("" if clean else ":unexpected")
        return f"attack:{kind}:ok"
    try:
        await http_pcm(http, text, "complete", rng)
    except httpx.RemoteProtocolError:
        return f"attack:{kind}:cut" + ("" if capped else ":unexpected")
    except httpx.HTTPStatusError as error:
        clean = (400, 429, 500, 413) if capped else (400, 429, 500)
        return f"attack:{kind}:{error.response.status_code}" + ("" if error.response.status_code in clean else ":unexpected")
    return f"attack:{kind}:ok"


async def client(
    index: int, server, expected: dict[str, int], until: float, tally: Counter, seed: int, attacks: dict[str, float],
    capped: bool = False,
) -> None:
    rng = random.Random(seed * 1000 + index)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, httpx.AsyncClient(base_url=server.http_url, timeout=120) as http:
        stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
        actions = ACTIONS + [(f"attack:{kind}", weight) for kind, weight in attacks.items()]
        while time.monotonic() < until:
            action = rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
            protocol = rng.choice(["grpc", "http"])
            if action.startswith("attack:"):
                try:
                    tally[await attack(action.split(":")[1], protocol, stub, http, rng, capped)] += 1
                except (grpc.aio.AioRpcError, httpx.HTTPError) as error:
                    tally[f"{action}:{type(error).__name__}:unexpected"] += 1
                continue
            text = "x" * 6000 if action == "oversize" else rng.choice(PROMPTS)
            try:
                audio = await (grpc_pcm(stub, text, action, rng) if protocol == "grpc" else http_pcm(http, text, action, rng))
            except grpc.aio.AioRpcError as error:
                tally[f"{protocol}:{error.code().name}" + ("" if action == "oversize" else ":unexpected")] += 1
                continue
            except httpx.HTTPStatusError as error:
                tally[f"{protocol}:{error.response.status_code}" + ("" if action == "oversize" else ":unexpected")] += 1
                continue
            except httpx.HTTPError as error:
                tally[f"{protocol}:{type(error).__name__}:unexpected"] += 1
                continue
            if audio is None:
                tally[f"{action}"] += 1
            elif action == "oversize":
                tally["oversize:accepted:unexpected"] += 1
            elif len(audio) == expected[text]:
                tally[f"completed:{action}"] += 1
            else:
                tally["corrupted"] += 1


async def _capped(call, capped: bool) -> None:
    """Await a long unit's gRPC call; with the cap on, the RESOURCE_EXHAUSTED that ends it is its expected outcome."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        if not (capped and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED):
            raise


TRIM_AFTER_S = 0.5
"""The server's --heap-trim-after here."""


async def resting_rss(pid: int, samples: int = 5) -> int:
    """The server's RSS with no request in flight: the median of a few samples a quarter second apart, from a second
    after its heap trim (TRIM_AFTER_S idle)."""
    await asyncio.sleep(TRIM_AFTER_S + 1.0)
    values = []
    for _ in range(samples):
        values.append(rss_bytes(pid))
        await asyncio.sleep(0.25)
    return int(statistics.median(values))


def rss_bytes(pid: int) -> int:
    return status_kib(pid, "VmRSS", default=0) * 1024


async def soak(
    server, duration: float, concurrency: int, seed: int, attacks: dict[str, float] | None = None, warmup: float = 30.0,
    capped: bool = False,
) -> dict:
    expected = {}
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = round(now - mark, 2)
        mark = now

    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
        for text in PROMPTS:
            expected[text] = len(await grpc_pcm(stub, text, "complete", random.Random(0)))
        phase("expected_lengths")
        if "long" in (attacks or {}):
            # The long units grow the server's memory once, to a bound (issue 13): each once, side by side on the two
            # Piper lanes, before the load (under it they take minutes of playback-paced turns).
            await asyncio.gather(*(_capped(grpc_pcm(stub, text, "complete", random.Random(0)), capped)
                                   for text in corpus.LONG_UNITS))
        phase("long_units")
        tally: Counter = Counter()

        async def load(seconds: float, index_offset: int) -> None:
            """`concurrency` clients for `seconds`; returns once their last requests have ended."""
            until = time.monotonic() + seconds
            await asyncio.gather(*(client(index_offset + i, server, expected, until, tally, seed, attacks or {}, capped)
                                   for i in range(concurrency)))

        await load(warmup, concurrency)
        phase("warmup")
        before = await resting_rss(server.process.pid)
        phase("rest_before")
        samples: list[tuple[float, int]] = []
        start = time.monotonic()

        async def sample_memory() -> None:
            while time.monotonic() < start + duration:
                samples.append((time.monotonic() - start, rss_bytes(server.process.pid)))
                await asyncio.sleep(1.0)

        await asyncio.gather(load(duration, 0), sample_memory())
        phase("load")
        after = await resting_rss(server.process.pid)
        phase("rest_after")
    return {
        "duration_s": duration,
        "warmup_s": warmup,
        "concurrency": concurrency,
        "counts": dict(sorted(tally.items())),
        "completed": sum(v for k, v in tally.items() if k.startswith("completed")),
        "corrupted": tally["corrupted"],
        "unexpected_errors": sum(v for k, v in tally.items() if k.endswith(":unexpected")),
        "rss_before_mb": before / 2**20,
        "rss_after_mb": after / 2**20,
        "rss_growth": after / before - 1,
        "rss_under_load_mb": [[round(t, 1), round(r / 2**20, 1)] for t, r in samples],
        "server_alive": server.alive(),
        "restarts": 0 if server.alive() else 1,
        "attacks": sorted(attacks or {}),
        "phases_s": phases,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--warmup", type=float, default=30, help="seconds of the same load (and the long units) before the memory samples")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attacks", default=",".join(ATTACKS), help=f"attack inputs to mix in, of {','.join(ATTACKS)} ('' for none)")
    parser.add_argument("--max-audio-seconds", type=float, default=None,
                        help="the server's cap on one session's audio (default: the server's own); under a long unit's "
                             "audio (~12 s a run) its session ends after its first, largest run: the same arena growth, in seconds "
                             "instead of minutes of playback-paced turns")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    args = parser.parse_args()
    attacks = {kind: ATTACKS[kind] for kind in filter(None, args.attacks.split(","))}
    cap = () if args.max_audio_seconds is None else ("--max-audio-seconds", str(args.max_audio_seconds))
    # The trim soon after the load, whatever the RSS grew by, so that the RSS at rest is read on a trimmed heap
    # (resting_rss).
    server = start_server(Path(tempfile.mkdtemp()), *cap, "--heap-trim-after", str(TRIM_AFTER_S), "--heap-trim-above", "0")
    try:
        result = asyncio.run(soak(server, args.duration, args.concurrency, args.seed, attacks, args.warmup,
                                  capped=args.max_audio_seconds is not None and args.max_audio_seconds > 0))
    finally:
        server.stop()
    print(f"soak: {args.concurrency} clients for {args.duration:.0f} s after {args.warmup:.0f} s of warm-up")
    print("| outcome | count |\n|---|---|")
    for key, value in result["counts"].items():
        print(f"| {key} | {value} |")
    print(f"completed {result['completed']}, corrupted {result['corrupted']}, unexpected errors {result['unexpected_errors']}")
    print(f"server RSS at rest {result['rss_before_mb']:.0f} MB -> {result['rss_after_mb']:.0f} MB ({result['rss_growth'] * 100:+.1f} %)")
    print(f"server alive at the end: {result['server_alive']} (restarts: {result['restarts']}); attacks mixed in: {', '.join(result['attacks']) or 'none'}")
    write_json(args.out, result)


if __name__ == "__main__":
    main()
