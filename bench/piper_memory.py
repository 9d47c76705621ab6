"""Server memory after long synthesis units: RSS after warm-up, then after each long unit, over HTTP and gRPC.

Starts `vocalis serve` (Piper, the embedded voice) with the running interpreter, so
running this script with another checkout's interpreter measures that checkout
(e.g. `/work/main/.venv/bin/python bench/piper_memory.py` for "before"). Steps:
  1. warm-up: a few ordinary requests over HTTP;
  2. `'漢' * 300` over HTTP (one unit of 300 CJK characters the English voice spells
     out: over 4,000 phoneme ids);
  3. a 1,000-character unit over gRPC (`text_splitting.max_unit_chars` = 1000, one
     run-on sentence);
  4. the two again (does memory keep growing?).
After each step it reads the server's resident memory (VmRSS, the server process
alone; its phonemizer child processes are listed apart) and its peak (VmHWM).
Target: RSS after every step within 20 % of its post-warm-up value.

    python bench/piper_memory.py --out bench/results/piper_memory.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.proc_status import status_kib  # noqa: E402
from tests.serving import start_server  # noqa: E402
from vocalis.clients.sync import Client  # noqa: E402
from vocalis.tts.v1 import audio_pb2  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

WARM_UP = [
    "Good morning. The train to the coast leaves at nine.",
    "Please remember to bring your umbrella, because the forecast says it will rain all afternoon.",
    "Thank you for calling. Your order has shipped and will arrive on Tuesday.",
]
CJK = "漢" * 300
RUN_ON = (
    "and the travellers walked on through the long valley past the farms and the quiet villages "
    "while the evening light faded over the hills "
) * 6
RUN_ON = RUN_ON[:1000]


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def snapshot(pid: int, step: str, seconds: float) -> dict:
    time.sleep(0.5)  # let freed memory settle
    kids = children(pid)
    return {
        "step": step,
        "rss_mib": status_kib(pid, "VmRSS", default=0) / 1024,
        "peak_mib": status_kib(pid, "VmHWM", default=0) / 1024,
        "children_rss_mib": sum(status_kib(p, "VmRSS", default=0) for p in kids) / 1024,
        "children": len(kids),
        "seconds": seconds,
    }


def http_unit(url: str, text: str) -> float:
    start = time.perf_counter()
    response = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "response_format": "pcm"}, timeout=900)
    response.raise_for_status()
    return time.perf_counter() - start


def grpc_unit(target: str, text: str) -> float:
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM)
    config.text_splitting.granularity = pb.SPLIT_GRANULARITY_SENTENCE
    config.text_splitting.max_unit_chars = len(text)
    start = time.perf_counter()
    with Client(target, timeout=900) as client:
        client.synthesize(config, text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default=None, help="name of this run in the table (default: the checkout's folder)")
    parser.add_argument("--rounds", type=int, default=2, help="times the two long units are sent")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "piper_memory.json")
    args = parser.parse_args()
    import vocalis.stages

    checkout = Path(vocalis.stages.__file__).resolve().parents[1]
    label = args.label or checkout.name
    server = start_server(Path(tempfile.mkdtemp(prefix="piper-memory-")), timeout=180)
    pid = server.process.pid
    rows: list[dict] = []
    try:
        start = time.perf_counter()
        for text in WARM_UP * 2:
            http_unit(server.http_url, text)
        rows.append(snapshot(pid, "after warm-up", time.perf_counter() - start))
        for round_index in range(1, args.rounds + 1):
            rows.append(snapshot(pid, f"'漢'*300 over HTTP ({round_index})", http_unit(server.http_url, CJK)))
            rows.append(snapshot(pid, f"1,000-char unit over gRPC ({round_index})", grpc_unit(server.grpc_target, RUN_ON)))
    finally:
        server.stop()
    base = rows[0]["rss_mib"]
    worst = max(r["rss_mib"] for r in rows)
    print(f"\n{label} ({checkout})")
    print("| step | RSS MiB | RSS / post-warm-up | peak MiB | phonemizer processes MiB | seconds |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['step']} | {r['rss_mib']:.0f} | {r['rss_mib'] / base:.2f} | {r['peak_mib']:.0f} "
              f"| {r['children_rss_mib']:.0f} ({r['children']}) | {r['seconds']:.1f} |")
    verdict = "within" if worst <= 1.2 * base else "NOT within"
    print(f"\nworst RSS {worst:.0f} MiB = {worst / base:.2f} x post-warm-up: {verdict} the 20 % target")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "label": label, "checkout": str(checkout), "machine": platform.platform(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "rows": rows,
        "worst_over_post_warm_up": worst / base,
    }, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
