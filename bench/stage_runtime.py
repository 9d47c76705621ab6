"""Throughput of the stage runtime: the tiny two-stage test family at several concurrencies.

In-process (no server): a talker (autoregressive, continuous batching) feeding a
chunked codec decoder. For each concurrency C, C callers each send `rounds`
greedy requests back to back (a closed loop, so requests join and leave the
running batch at different steps); it reports frames/s, the speed-up over one
caller sending the same requests one by one, and time to first audio (p50)
against a lone caller's.

    python bench/stage_runtime.py --frames 100 --levels 1,16 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import write_json  # noqa: E402
from vocalis.stages.models._template.build import build_checkpoint  # noqa: E402
from vocalis.stages.models._template.loader import load  # noqa: E402
from vocalis.stages.models._template.runtime import TinyInput  # noqa: E402
from vocalis.stages.runtime.deploy import load_deploy  # noqa: E402
from vocalis.stages.runtime.output import AudioOutput  # noqa: E402
from vocalis.stages.runtime.request import SynthesisRequest  # noqa: E402
from vocalis.stages.runtime.sampling import SamplingParams  # noqa: E402

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


HANDOVERS = ("per_step", "per_chunk")
"""How the talker hands frames to the codec stage: every frame as it is made, or when a chunk can be decoded."""


def set_handover(model, handover: str, policy) -> None:
    model.pipeline.stages[0].handover = None if handover == "per_step" else policy


async def measure(model, levels: list[int], frames: int, rounds: int, repeats: int) -> list[dict]:
    """Both handovers, interleaved `repeats` times (the machine is shared: medians of alternating runs)."""
    policy = model.pipeline.stages[0].handover
    samples: dict[tuple[str, int | None], list[tuple[float, float, list[float]]]] = {}
    for handover in HANDOVERS:
        set_handover(model, handover, policy)
        await closed_loop(model, 4, 1, frames)  # warm-up
        await closed_loop(model, 1, 2, frames)  # and of the lone path
    for _ in range(repeats):
        for handover in HANDOVERS:
            set_handover(model, handover, policy)
            for level in (None, *levels):  # None: one caller sending every request one by one
                cpu = time.process_time()
                wall, made, ttfa = await closed_loop(model, level or 1, 3 * rounds if level is None else rounds, frames, seed=level or 0)
                cpu = time.process_time() - cpu
                samples.setdefault((handover, level), []).append((made / wall, cpu / made, ttfa))
    rows = []
    for handover in HANDOVERS:
        lone = samples[(handover, None)]
        lone_fps = statistics.median(s[0] for s in lone)
        lone_ttfa = statistics.median(t for s in lone for t in s[2])
        for level in levels:
            runs = samples[(handover, level)]
            fps = statistics.median(s[0] for s in runs)
            ttfa = statistics.median(t for s in runs for t in s[2])
            rows.append(
                {
                    "handover": handover,
                    "concurrency": level,
                    "frames_per_s": fps,
                    "sequential_frames_per_s": lone_fps,
                    "speedup": fps / lone_fps,
                    "cpu_ms_per_frame": 1000 * statistics.median(s[1] for s in runs),
                    "sequential_cpu_ms_per_frame": 1000 * statistics.median(s[1] for s in lone),
                    "ttfa_p50_s": ttfa,
                    "ttfa_p50_vs_lone": ttfa / lone_ttfa,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100, help="frames generated per request")
    parser.add_argument("--levels", default="1,4,16,64")
    parser.add_argument("--rounds", type=int, default=3, help="requests each caller sends back to back")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each handover (medians are reported)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stage_runtime.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    levels = [int(x) for x in args.levels.split(",")]

    checkpoint = build_checkpoint(Path(tempfile.mkdtemp()) / "tiny-tts", eos_token_id=64)
    overrides = {
        "talker": {"max_num_seqs": max(levels), "max_num_batched_tokens": 8192, "kv_cache_bytes": max(levels) * 512 * 1024},
        "code2wav": {"max_num_seqs": max(levels)},
    }
    model = load(checkpoint, load_deploy(ROOT / "stages" / "models" / "_template" / "deploy.yaml", None, overrides))
    try:
        rows = asyncio.run(measure(model, levels, args.frames, args.rounds, args.repeats))
    finally:
        model.close()

    print(f"tiny family, {args.frames} frames per request, {args.rounds} rounds per caller, medians of {args.repeats} "
          f"alternating runs, torch threads {torch.get_num_threads()}")
    print("| handover | concurrency | frames/s | sequential frames/s | speed-up | CPU ms/frame (sequential) | TTFA p50 s | TTFA p50 / lone |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['handover']} | {r['concurrency']} | {r['frames_per_s']:.0f} | {r['sequential_frames_per_s']:.0f} | "
            f"{r['speedup']:.1f}x | {r['cpu_ms_per_frame']:.2f} ({r['sequential_cpu_ms_per_frame']:.2f}) | "
            f"{r['ttfa_p50_s']:.4f} | {r['ttfa_p50_vs_lone']:.2f} |"
        )
    write_json(args.out, {"frames": args.frames, "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
