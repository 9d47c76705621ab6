"""Throughput of the stage runtime: the tiny two-stage test family at several concurrencies.

In-process (no server): a talker (autoregressive, continuous batching) feeding a
chunked codec decoder. For each concurrency C, C callers each send `rounds`
greedy requests back to back (a closed loop, so requests join and leave the
running batch at different steps); it reports frames/s, the speed-up over one
caller sending the same requests one by one, and time to first audio (p50)
against a lone caller's.

    python bench/stage_runtime.py --frames 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tiny_tts.build import build_checkpoint  # noqa: E402
from tests.tiny_tts.family import TinyInput, load  # noqa: E402
from vocalis.stages.deploy import load_deploy  # noqa: E402
from vocalis.stages.output import AudioOutput  # noqa: E402
from vocalis.stages.request import SynthesisRequest  # noqa: E402
from vocalis.stages.sampling import SamplingParams  # noqa: E402

TEXT = "A sentence of ordinary length for the tiny talker to read out loud."


async def one_request(model, frames: int) -> float:
    """Run one greedy request; its time to first audio."""
    sampling = SamplingParams(temperature=0.0, max_new_tokens=frames)
    request = SynthesisRequest(text=TEXT, stage_input=TinyInput(sampling), output=AudioOutput())
    start = time.perf_counter()
    model.pipeline.submit(request)
    first = None
    async for _ in request.output:
        first = first or time.perf_counter() - start
    if request.error:
        raise request.error
    return first or 0.0


async def closed_loop(model, clients: int, rounds: int, frames: int, seed: int = 0) -> tuple[float, int, list[float]]:
    """`clients` callers each sending `rounds` requests back to back: wall seconds, frames made, every TTFA.

    Lengths vary (frames/2 to 3*frames/2) and callers start at staggered times, as real
    traffic does; identical, simultaneous requests would stay in lock-step and measure bursts.
    """
    rng = random.Random(seed)
    plans = [[rng.randint(frames // 2, frames * 3 // 2) for _ in range(rounds)] for _ in range(clients)]
    offsets = [rng.uniform(0, 0.05) for _ in range(clients)]

    async def client(offset: float, lengths: list[int]) -> list[float]:
        await asyncio.sleep(offset)
        return [await one_request(model, n) for n in lengths]

    start = time.perf_counter()
    results = await asyncio.gather(*(client(o, p) for o, p in zip(offsets, plans, strict=True)))
    return time.perf_counter() - start, sum(map(sum, plans)), [t for r in results for t in r]


async def measure(model, levels: list[int], frames: int, rounds: int) -> list[dict]:
    await closed_loop(model, 4, 1, frames)  # warm-up
    lone_wall, lone_frames, lone_ttfa = await closed_loop(model, 1, 3 * rounds, frames)
    lone_fps = lone_frames / lone_wall
    rows = []
    for level in levels:
        wall, made, ttfa = await closed_loop(model, level, rounds, frames, seed=level)
        rows.append(
            {
                "concurrency": level,
                "frames_per_s": made / wall,
                "sequential_frames_per_s": lone_fps,
                "speedup": made / wall / lone_fps,
                "ttfa_p50_s": statistics.median(ttfa),
                "ttfa_p50_vs_lone": statistics.median(ttfa) / statistics.median(lone_ttfa),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100, help="frames generated per request")
    parser.add_argument("--levels", default="1,4,16,64")
    parser.add_argument("--rounds", type=int, default=3, help="requests each caller sends back to back")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stage_runtime.json")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    checkpoint = build_checkpoint(Path(tempfile.mkdtemp()) / "tiny-tts", eos_token_id=64)
    overrides = {"talker": {"max_num_seqs": max(levels), "max_num_batched_tokens": 8192}, "code2wav": {"max_num_seqs": max(levels)}}
    model = load(checkpoint, load_deploy(ROOT / "tests" / "tiny_tts" / "deploy.yaml", None, overrides))
    try:
        rows = asyncio.run(measure(model, levels, args.frames, args.rounds))
    finally:
        model.close()

    print(f"tiny family, {args.frames} frames per request, {args.rounds} rounds per caller, torch threads {torch.get_num_threads()}")
    print("| concurrency | frames/s | sequential frames/s | speed-up | TTFA p50 s | TTFA p50 / lone |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['concurrency']} | {r['frames_per_s']:.0f} | {r['sequential_frames_per_s']:.0f} | {r['speedup']:.1f}x | "
            f"{r['ttfa_p50_s']:.4f} | {r['ttfa_p50_vs_lone']:.2f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"frames": args.frames, "rows": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
