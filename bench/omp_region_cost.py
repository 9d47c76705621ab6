"""What one parallel torch op costs beyond its work, by where it runs: the main thread, a lone stage thread, or a stage
thread beside other threads that have their own OpenMP teams (the server's layout: every stage worker is a thread,
and each one that runs a parallel op keeps a team of `torch.get_num_threads()`).

Why: bench/machine_limit.py found Qwen3-TTS 0.6B's bfloat16 decode step ~2x a bare replay of its matmuls. Part of it is
this. torch's pip wheels use GNU OpenMP, whose idle team threads spin a while before they sleep, so the next
parallel region starts at once; but once the process has more OpenMP threads than CPUs (two stage teams on two cores
already do), it spins only ~100 times, every idle team thread sleeps, and each parallel region pays a futex wake.
A decode step is ~740 of them at c = 1 (every linear of the talker and the code predictor's 15 passes).

Each layout runs in its own process (a thread's team lives as long as the thread), timing a small hot-weight linear,
whose own work is a few microseconds, so the per-call time is mostly what a region costs:

    python bench/omp_region_cost.py [--calls 2000 --repeats 5 --regions 737]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import write_json  # noqa: E402

LAYOUTS = {
    "main": "the main thread, the only one that runs torch ops",
    "lone stage thread": "one other thread runs every torch op (a pipeline with one torch stage, loaded off the main thread)",
    "beside other teams": "a stage thread while the main thread and one more stage thread hold OpenMP teams (the server)",
}
SHAPE = (256, 1024)
"""The linear's weight, bfloat16: 0.5 MiB, hot in cache, and past the size at which torch parallelises the op."""


def per_call_us(calls: int, repeats: int) -> float:
    """Best over `repeats` of the mean time of one F.linear of a row against the hot SHAPE weight."""
    weight = torch.randn(*SHAPE).to(torch.bfloat16)
    x = torch.randn(1, SHAPE[1]).to(torch.bfloat16)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(calls // 10):
            F.linear(x, weight)
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                F.linear(x, weight)
            best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def run_team() -> None:
    """One parallel op, so that the calling thread holds an OpenMP team from now on."""
    torch.randn(512, 512) @ torch.randn(512, 512)


def measure_layout(layout: str, calls: int, repeats: int) -> float:
    if layout == "main":
        return per_call_us(calls, repeats)
    result: list[float] = []
    release = threading.Event()
    if layout == "beside other teams":
        run_team()
        ready = threading.Event()

        def hold() -> None:  # a stage worker idle on its inbox, its team kept
            run_team()
            ready.set()
            release.wait()

        threading.Thread(target=hold, daemon=True).start()
        ready.wait()
    worker = threading.Thread(target=lambda: result.append(per_call_us(calls, repeats)))
    worker.start()
    worker.join()
    release.set()
    return result[0]


def in_subprocess(layout: str, calls: int, repeats: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--layout", layout, "--calls", str(calls), "--repeats", str(repeats)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["us_per_call"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="every layout once per round, interleaved; medians kept")
    parser.add_argument("--regions", type=int, default=737, help="parallel regions per step, for the per-step column "
                        "(737: Qwen3-TTS 0.6B's matmuls per decode step at c = 1, bench/machine_limit.py)")
    parser.add_argument("--layout", choices=list(LAYOUTS), help=argparse.SUPPRESS)  # one layout, in this process
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "omp_region_cost.json")
    args = parser.parse_args(argv)
    if args.layout:
        print(json.dumps({"us_per_call": measure_layout(args.layout, args.calls, args.repeats)}))
        return {}
    runs: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    for _ in range(args.rounds):
        for name in LAYOUTS:
            runs[name].append(in_subprocess(name, args.calls, args.repeats))
    median = {name: statistics.median(v) for name, v in runs.items()}
    base = median["main"]
    load = os.getloadavg()
    print(f"bfloat16 F.linear [1, {SHAPE[1]}] x [{SHAPE[0]}, {SHAPE[1]}], hot weights; torch {torch.get_num_threads()} "
          f"threads, {os.cpu_count()} CPUs; load average {load[0]:.2f}; median of {args.rounds} interleaved rounds")
    print(f"| layout | us per call [min-max] | over the main thread, us | x {args.regions} regions, ms per step |")
    print("|---|---|---|---|")
    rows = []
    for name, about in LAYOUTS.items():
        extra = median[name] - base
        rows.append({"layout": name, "about": about, "us_per_call": median[name], "runs_us": runs[name],
                     "extra_us": extra, "extra_ms_per_step": extra * args.regions / 1e3})
        print(f"| {name} | {median[name]:.0f} [{min(runs[name]):.0f}-{max(runs[name]):.0f}] | {extra:+.0f} | "
              f"{extra * args.regions / 1e3:+.1f} |")
    result = {"shape": SHAPE, "threads": torch.get_num_threads(), "cpus": os.cpu_count(), "load_average": load,
              "regions_per_step": args.regions, "rows": rows}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
