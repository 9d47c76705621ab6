"""A real-size family with idle threads' OpenMP teams let go (stages/runtime/openmp_teams.py) against kept, paired:
each pair runs both sides in fresh processes, one after the other, alternating which goes first; the generator
stage's decode step (median) and the wall time of c greedy requests.

    python bench/openmp_teams_paired.py --family qwen3-0.6b-customvoice --dtype bfloat16 --levels 1,4 --pairs 5
    python bench/openmp_teams_paired.py --tiny --frames 3 --pairs 1      # CI-sized: the committed tiny checkpoint
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.report import spread, write_json  # noqa: E402

SIDES = ("kept", "released")


def one_side(side: str, checkpoint: Path, key: str, dtype: str, c: int, frames: int) -> dict:
    """In this process: load, warm up, then time c requests' generator steps and wall."""

    import machine_limit
    import real_size_cpu

    if side == "kept":  # the runtime as it was: no thread ever lets its team go (every caller asks for the runtime)
        import vocalis.stages.runtime.openmp_teams as openmp_teams

        openmp_teams._gnu_openmp = lambda: None
    from vocalis.stages.models.registry import load_model

    model = load_model(str(checkpoint), stage_overrides=json.dumps(real_size_cpu.stage_overrides(dtype, c)))
    try:
        machine_limit.time_steps(model, key, 1, 2, 4)  # warm-up
        start = time.perf_counter()
        run = machine_limit.time_steps(model, key, c, frames, 4)
        wall = time.perf_counter() - start
    finally:
        model.close()
    return {"step_s": statistics.median(run.durations), "steps": len(run.durations), "batch": run.batch, "wall_s": wall}


def in_subprocess(side: str, checkpoint: Path, key: str, dtype: str, c: int, frames: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--side", side, "--checkpoint", str(checkpoint), "--family", key,
                          "--dtype", dtype, "--levels", str(c), "--frames", str(frames)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="qwen3-0.6b-customvoice")
    parser.add_argument("--dtype", default="bfloat16", help="the generator stage's compute dtype")
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoint instead of a real-size one")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "openmp_teams_paired.json")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # one side, in this process
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    if args.side:
        print(json.dumps(one_side(args.side, args.checkpoint, args.family, args.dtype, levels[0], args.frames)))
        return {}
    import real_size_cpu

    checkpoint = real_size_cpu.FAMILIES[args.family].tiny
    if not args.tiny:
        checkpoint = args.work_dir / args.family
        real_size_cpu.build(args.family, checkpoint)
    load = os.getloadavg()
    print(f"{args.family} ({'tiny' if args.tiny else 'real size'}), generator in {args.dtype}, {args.frames} frames a "
          f"request, {args.pairs} pairs; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    rows = []
    for c in levels:
        pairs = []
        for i in range(args.pairs):
            order = SIDES if i % 2 == 0 else SIDES[::-1]
            pair = {side: in_subprocess(side, checkpoint, args.family, args.dtype, c, args.frames) for side in order}
            pairs.append(pair)
        step = [p["released"]["step_s"] / p["kept"]["step_s"] for p in pairs]
        wall = [p["released"]["wall_s"] / p["kept"]["wall_s"] for p in pairs]
        rows.append({"concurrency": c, "pairs": pairs, "step_ratio": step, "wall_ratio": wall,
                     "kept_step_ms": [1000 * p["kept"]["step_s"] for p in pairs],
                     "released_step_ms": [1000 * p["released"]["step_s"] for p in pairs]})
    print("| c | step ms, teams kept | step ms, released | released / kept: step | released / kept: wall |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {spread(r['kept_step_ms'])} | {spread(r['released_step_ms'])} | "
              f"{spread(r['step_ratio'])} | {spread(r['wall_ratio'])} |")
    result = {"family": args.family, "dtype": args.dtype, "tiny": args.tiny, "frames": args.frames,
              "load_average": load, "cores": os.cpu_count(), "rows": rows}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
