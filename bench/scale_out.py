"""Throughput through HAProxy (deploy/haproxy/haproxy.cfg) at 1, 2 and 3 replicas, and the proxy's own cost.

Starts three `vocalis serve` replicas on loopback (Piper, the embedded default; `--tiny` for the tiny test family),
then for N = 1, 2, 3 the proxy in front of the first N, and runs a closed loop of `--concurrency` gRPC clients through
it for `--seconds`: requests per second, audio seconds per second, and the ratio to one replica. Then the proxy's
overhead at concurrency 1: the same request, alternately direct to replica 1 and through the proxy in front of it alone,
median latency of each. On a machine with few cores the CPU caps the scale-out: every replica competes for the same
cores, so the ratio to one replica says more about the machine than about the proxy; the overhead row does not.

Prints a table and writes JSON (default bench/results/scale_out.json).

    python bench/scale_out.py --seconds 8 --concurrency 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fleet import start_proxy  # noqa: E402
from tests.serving import start_server  # noqa: E402
from vocalis.clients.sync import Client  # noqa: E402
from vocalis.tts.v1 import audio_pb2  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog."


def closed_loop(target: str, concurrency: int, seconds: float, config: pb.SessionConfig) -> dict:
    stop = time.monotonic() + seconds
    done: list[tuple[float, float]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with Client(target, timeout=60) as client:
            while time.monotonic() < stop:
                started = time.monotonic()
                try:
                    result = client.synthesize(config, TEXT)
                except Exception as error:  # noqa: BLE001 - counted and reported
                    with lock:
                        failures.append(str(error))
                    continue
                with lock:
                    done.append((time.monotonic() - started, result.audio_seconds))

    began = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    return {
        "requests": len(done),
        "failures": len(failures),
        "requests_per_s": len(done) / elapsed,
        "audio_s_per_s": sum(audio for _, audio in done) / elapsed,
        "median_latency_s": statistics.median(latency for latency, _ in done) if done else None,
    }


def proxy_overhead(direct: str, proxied: str, requests: int, config: pb.SessionConfig) -> dict:
    """Median latency direct and through the proxy, alternating request by request (so load from elsewhere hits both):
    a whole synthesis, and a ListModels round trip (no model work: what the proxy adds, alone)."""
    synthesis: dict[str, list[float]] = {"direct": [], "proxy": []}
    unary: dict[str, list[float]] = {"direct": [], "proxy": []}
    with Client(direct, timeout=60) as one, Client(proxied, timeout=60) as other:
        for client in (one, other):
            client.synthesize(config, TEXT)  # connections open, caches warm
        for _ in range(requests):
            for name, client in (("direct", one), ("proxy", other)):
                started = time.perf_counter()
                client.synthesize(config, TEXT)
                synthesis[name].append(time.perf_counter() - started)
        for _ in range(10 * requests):
            for name, client in (("direct", one), ("proxy", other)):
                started = time.perf_counter()
                client.list_models()
                unary[name].append(time.perf_counter() - started)
    direct_s, proxy_s = statistics.median(synthesis["direct"]), statistics.median(synthesis["proxy"])
    return {
        "requests": requests,
        "direct_median_s": direct_s,
        "proxy_median_s": proxy_s,
        "overhead": proxy_s / direct_s - 1,
        "unary_requests": 10 * requests,
        "unary_direct_median_s": statistics.median(unary["direct"]),
        "unary_proxy_median_s": statistics.median(unary["proxy"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each closed-loop run")
    parser.add_argument("--concurrency", type=int, default=4, help="clients in the closed loop")
    parser.add_argument("--overhead-requests", type=int, default=20, help="requests each way for the overhead row")
    parser.add_argument("--tiny", action="store_true", help="serve the tiny test family instead of Piper")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "scale_out.json")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="scale-out-"))
    if args.tiny:
        from vocalis.stages.models._template.build import build_checkpoint

        model_args: tuple[str, ...] = ("--family-module", "vocalis.stages.models._template.family", str(build_checkpoint(work / "tiny-tts", eos_token_id=64)))
        config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=60)
    else:
        model_args = ()
        config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM)
    with ThreadPoolExecutor(3) as pool:
        replicas = list(pool.map(lambda _: start_server(work, *model_args, timeout=180), range(3)))
    rows = []
    try:
        for count in (1, 2, 3):
            proxy = start_proxy(replicas[:count], work)
            try:
                closed_loop(proxy.grpc_target, args.concurrency, 1.0, config)  # warm every replica through the proxy
                rows.append({"replicas": count, **closed_loop(proxy.grpc_target, args.concurrency, args.seconds, config)})
            finally:
                proxy.stop()
        proxy = start_proxy(replicas[:1], work)
        try:
            overhead = proxy_overhead(replicas[0].grpc_target, proxy.grpc_target, args.overhead_requests, config)
        finally:
            proxy.stop()
    finally:
        for replica in replicas:
            replica.stop()

    one = rows[0]["requests_per_s"]
    print(f"model: {'tiny test family' if args.tiny else 'Piper en_US-joe-medium'}; {os.cpu_count()} cores; "
          f"concurrency {args.concurrency}; {args.seconds:.0f} s per row")
    print(f"{'replicas':>8} {'req/s':>8} {'audio s/s':>10} {'ratio to 1':>11} {'median s':>9} {'failures':>9}")
    for row in rows:
        row["ratio_to_one"] = row["requests_per_s"] / one if one else None
        print(f"{row['replicas']:>8} {row['requests_per_s']:>8.2f} {row['audio_s_per_s']:>10.2f} {row['ratio_to_one']:>11.2f} "
              f"{row['median_latency_s']:>9.3f} {row['failures']:>9}")
    print(f"proxy overhead at c=1: direct {overhead['direct_median_s'] * 1000:.1f} ms, through HAProxy "
          f"{overhead['proxy_median_s'] * 1000:.1f} ms: {overhead['overhead'] * 100:+.1f} % ({overhead['requests']} each, alternating)")
    added = overhead["unary_proxy_median_s"] - overhead["unary_direct_median_s"]
    print(f"ListModels round trip: direct {overhead['unary_direct_median_s'] * 1000:.2f} ms, through HAProxy "
          f"{overhead['unary_proxy_median_s'] * 1000:.2f} ms: the proxy adds {added * 1000:.2f} ms "
          f"({added / overhead['direct_median_s'] * 100:.2f} % of a synthesis)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "model": "tiny" if args.tiny else "piper",
        "concurrency": args.concurrency,
        "seconds": args.seconds,
        "rows": rows,
        "proxy_overhead_c1": overhead,
    }, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
