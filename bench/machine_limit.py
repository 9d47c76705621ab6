"""How close a family's generator step comes to what this CPU can do at all: the step's matmuls at the CPU's own
matmul rate (float32 and bfloat16) and its weight bytes over the measured memory bandwidth, beside Vocalis's step.

For Qwen3-TTS 0.6B CustomVoice the step is one talker forward plus its code predictor's 15 passes per frame (the
first on two positions: the talker's hidden state and code 0's embedding). From the real-size config it derives the
step's matmul shapes, FLOPs and weight bytes at each concurrency c; then, in one process:
1. times torch's matmul on each of those shapes (float32 and bfloat16, best of --repeats), giving the
   compute-bound time per step (every matmul at the rate this CPU reaches on its shape, weights hot);
2. measures the memory bandwidth with a large tensor copy (bytes read plus bytes written over time), giving the
   bandwidth-bound time per step (the weights a step reads, in the loaded dtype, over that bandwidth: at c = 1
   every weight is read once per use; the code predictor's ~300 MB does not stay in cache between its passes);
3. loads the real-size random checkpoint (bench/real_size_cpu.py builds it into --work-dir, reused when there)
   through the family loader and times the first stage's steps while c greedy requests run through the pipeline;
4. prints limit / measured per c, where the limit is the larger of the two bounds, and replay / measured, where the
   replay is the step's matmuls alone run in order on distinct (cold) weights of the real sizes.

    python bench/machine_limit.py                    # real size, c = 1 and 4
    python bench/machine_limit.py --tiny --frames 3  # CI-sized: the committed tiny checkpoint
    python bench/machine_limit.py --profile          # also a torch.profiler table of one c = 1 request's steps
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import real_size_cpu  # noqa: E402
from bench.report import write_json  # noqa: E402
from bench.stage_weights import model_weight_bytes  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul", "mkldnn::", "aten::_mkldnn")


@dataclass(frozen=True)
class Matmul:
    """`count` uses per step of a [rows, inner] x [inner, outer] product."""

    name: str
    rows: int
    inner: int
    outer: int
    count: int
    distinct: int
    """Distinct weights among the uses (a layer's weight, or a predictor layer reused by every pass)."""

    @property
    def flops(self) -> int:
        return 2 * self.rows * self.inner * self.outer * self.count

    @property
    def weights(self) -> int:
        """Weight elements read per step (each use reads its weight once)."""
        return self.inner * self.outer * self.count


def decoder_layers(prefix: str, sub: dict, rows: int, count: int, distinct: int) -> list[Matmul]:
    """The seven projections of `count` Qwen3 decoder layers on `rows` positions."""
    hidden, inter, hd = sub["hidden_size"], sub["intermediate_size"], sub["head_dim"]
    q, kv = sub["num_attention_heads"] * hd, sub["num_key_value_heads"] * hd
    shapes = [("q", hidden, q), ("k", hidden, kv), ("v", hidden, kv), ("o", q, hidden),
              ("gate", hidden, inter), ("up", hidden, inter), ("down", inter, hidden)]
    return [Matmul(f"{prefix} {n}", rows, i, o, count, distinct) for n, i, o in shapes]


def qwen3_step(config: dict, c: int) -> list[Matmul]:
    """One Qwen3-TTS frame for c sequences: the talker's decode step and code-predictor passes (talker.py)."""
    talker, cp = config["talker_config"], config["talker_config"]["code_predictor_config"]
    passes = cp["num_code_groups"] - 1
    layers, cp_layers = talker["num_hidden_layers"], cp["num_hidden_layers"]
    out = decoder_layers("talker", talker, c, layers, layers)
    out.append(Matmul("talker codec head", c, talker["hidden_size"], talker["vocab_size"], 1, 1))
    if cp["hidden_size"] != talker["hidden_size"]:
        out.append(Matmul("predictor projection", c, talker["hidden_size"], cp["hidden_size"], passes + 1, 1))
    out += decoder_layers("predictor first pass", cp, 2 * c, cp_layers, cp_layers)
    out += decoder_layers("predictor pass", cp, c, cp_layers * (passes - 1), cp_layers)
    out.append(Matmul("predictor head", c, cp["hidden_size"], cp["vocab_size"], passes, passes))
    return out


STEPS: dict[str, Callable[[dict, int], list[Matmul]]] = {"qwen3-0.6b-customvoice": qwen3_step}


# -- the machine ----------------------------------------------------------------------------------


def _best(fn: Callable[[], object], repeats: int, inner: int) -> float:
    """Best over `repeats` of the mean time of `inner` calls (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def matmul_seconds(rows: int, inner: int, outer: int, dtype: torch.dtype, repeats: int) -> float:
    """Seconds of one F.linear of that shape (the op the stages call), weights hot."""
    x = torch.randn(rows, inner).to(dtype)
    w = torch.randn(outer, inner).to(dtype)
    calls = max(1, int(2e8 // (2 * rows * inner * outer)))  # ~0.2 GFLOP per timing
    with torch.inference_mode():
        return _best(lambda: F.linear(x, w), repeats, min(calls, 200))


def replay_seconds(step: list[Matmul], dtype: torch.dtype, repeats: int) -> float:
    """Seconds of the step's matmuls alone, in order, each use on its own layer's weight (cold, as in a real step,
    where the weights a step reads do not fit in cache): the rate torch's kernels reach on the step as a whole."""
    weights = [[torch.randn(m.outer, m.inner).to(dtype) for _ in range(m.distinct)] for m in step]
    inputs = [torch.randn(m.rows, m.inner).to(dtype) for m in step]

    def run() -> None:
        for m, ws, x in zip(step, weights, inputs, strict=True):
            for use in range(m.count):
                F.linear(x, ws[use % m.distinct])

    with torch.inference_mode():
        return _best(run, repeats, 1)


def copy_bandwidth(repeats: int, nbytes: int = 512 * 2**20) -> float:
    """Bytes per second of a large tensor copy, counting the bytes read and the bytes written."""
    src = torch.ones(nbytes // 4)
    dst = torch.empty_like(src)
    return 2 * nbytes / _best(lambda: dst.copy_(src), repeats, 1)


def limits(step: list[Matmul], repeats: int, bandwidth: float) -> dict:
    """Per dtype: FLOPs, weight bytes, the compute-bound and bandwidth-bound seconds per step, and each shape's rate."""
    out = {}
    for name, dtype in DTYPES.items():
        times: dict[tuple[int, int, int], float] = {}
        for m in step:
            key = (m.rows, m.inner, m.outer)
            if key not in times:
                times[key] = matmul_seconds(*key, dtype, repeats)
        compute = sum(times[(m.rows, m.inner, m.outer)] * m.count for m in step)
        weight_bytes = sum(m.weights for m in step) * dtype.itemsize
        flops = sum(m.flops for m in step)
        out[name] = {"flops": flops, "weight_bytes": weight_bytes, "compute_s": compute, "bandwidth_s": weight_bytes / bandwidth,
                     "replay_s": replay_seconds(step, dtype, repeats),
                     "gflops_at_compute_bound": flops / compute / 1e9,
                     "shapes": [{"rows": r, "inner": i, "outer": o, "gflops": 2 * r * i * o / t / 1e9} for (r, i, o), t in times.items()]}
    return out


# -- Vocalis's step -------------------------------------------------------------------------------


def generator_stage(model):
    """The stage whose steps are timed: the first that generates (a voice or prompt stage before it only prepares)."""
    from vocalis.stages.runtime.prepare import PrepareStage

    return next(s for s in model.pipeline.stages if not isinstance(s, PrepareStage))


def time_steps(model, key: str, c: int, frames: int, profile: bool = False) -> tuple[list[float], dict[str, float]]:
    """Seconds of each generator step that ran all c sequences, while c requests of `frames` frames run; with
    `profile`, also the self CPU seconds per torch op over those steps but the first (profiled on the stage's own thread)."""
    stage = generator_stage(model)
    inner = stage.step
    durations: list[float] = []
    ops: dict[str, float] = {}

    def timed():
        start = time.perf_counter()
        if profile:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                out = inner()
        else:
            out = inner()
        if len(stage.batch_requests()) == c:
            durations.append(time.perf_counter() - start)
            if profile and len(durations) > 1:  # the first is the prompt step (many positions): decode steps only
                for event in prof.key_averages():
                    ops[event.key] = ops.get(event.key, 0.0) + event.self_cpu_time_total / 1e6
        return out

    family = real_size_cpu.FAMILIES[key]

    async def run():
        await asyncio.gather(*(real_size_cpu.one(model, family, frames, 0) for _ in range(c)))

    stage.step = timed
    try:
        asyncio.run(run())
    finally:
        stage.step = inner
    return durations, ops


def run(key: str, checkpoint: Path, levels: list[int], frames: int, repeats: int, dtype: str, profile: bool) -> dict:
    from vocalis.stages.models.registry import load_model

    config = json.loads((checkpoint / "config.json").read_text())
    bandwidth = copy_bandwidth(repeats)
    machine = {c: limits(STEPS[key](config, c), repeats, bandwidth) for c in levels}
    model = load_model(str(checkpoint), stage_overrides=json.dumps(real_size_cpu.stage_overrides(dtype, max(levels))))
    try:
        loaded_bytes = model_weight_bytes(model)
        time_steps(model, key, 1, 2)  # warm-up
        measured = {c: time_steps(model, key, c, frames)[0] for c in levels}
        profiled = None
        if profile:
            durations, ops = time_steps(model, key, 1, frames, profile=True)
            top = dict(sorted(ops.items(), key=lambda kv: -kv[1])[:20])
            profiled = {"steps": len(durations) - 1, "steps_s": sum(durations[1:]), "op_self_s": sum(ops.values()),
                        "matmul_self_s": sum(v for k, v in ops.items() if k.startswith(MATMUL_OPS)), "top_ops_self_s": top}
    finally:
        model.close()
    rows = []
    for c in levels:
        step_s = statistics.median(measured[c])
        for name, lim in machine[c].items():
            bound = max(lim["compute_s"], lim["bandwidth_s"])
            rows.append({"family": key, "concurrency": c, "limit_dtype": name, "vocalis_dtype": dtype, "step_s": step_s,
                         "steps": len(measured[c]), "compute_s": lim["compute_s"], "bandwidth_s": lim["bandwidth_s"],
                         "limit_s": bound, "fraction": bound / step_s, "replay_s": lim["replay_s"],
                         "replay_fraction": lim["replay_s"] / step_s, "gflops": lim["flops"] / 1e9,
                         "weight_bytes": lim["weight_bytes"], "gflops_at_compute_bound": lim["gflops_at_compute_bound"],
                         "achieved_gflops": lim["flops"] / step_s / 1e9, "shapes": lim["shapes"]})
    return {"bandwidth_bytes_per_s": bandwidth, "loaded_weight_bytes": loaded_bytes, "rows": rows, "profile": profiled}


def _line(r: dict) -> str:
    return (f"| {r['family']} | {r['concurrency']} | {r['limit_dtype']} | {r['gflops']:.2f} | {r['weight_bytes'] / 2**30:.2f} | "
            f"{r['gflops_at_compute_bound']:.1f} | {1000 * r['compute_s']:.0f} | {1000 * r['bandwidth_s']:.0f} | "
            f"{1000 * r['replay_s']:.0f} | {1000 * r['step_s']:.0f} ({r['vocalis_dtype']}) | {r['achieved_gflops']:.1f} | "
            f"{r['fraction']:.2f} | {r['replay_fraction']:.2f} |")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(STEPS))
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=8, help="frames per request while steps are timed")
    parser.add_argument("--repeats", type=int, default=3, help="timings per matmul shape and for the bandwidth (best kept)")
    parser.add_argument("--vocalis-dtype", default="float32", help="compute dtype of Vocalis's first stage")
    parser.add_argument("--profile", action="store_true", help="also profile one c = 1 request with torch.profiler")
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoint instead of a real-size random one")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "machine_limit.json")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    load = os.getloadavg()
    print(f"{'tiny' if args.tiny else 'real-size random'} checkpoints, {args.frames} frames per request, greedy, "
          f"{os.cpu_count()} cores, torch {torch.get_num_threads()} threads, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| family | c | limit dtype | GFLOP/step | weight GiB/step | GFLOP/s on its shapes | compute-bound ms | "
          "bandwidth-bound ms | matmul replay ms | Vocalis step ms | Vocalis GFLOP/s | limit/measured | replay/measured |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = {}
    for key in args.families.split(","):
        checkpoint = real_size_cpu.FAMILIES[key].tiny
        if not args.tiny:
            checkpoint = args.work_dir / key
            real_size_cpu.build(key, checkpoint)
        result = run(key, checkpoint, levels, args.frames, args.repeats, args.vocalis_dtype, args.profile)
        results[key] = result
        print(f"bandwidth (copy, read + write) {result['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s; "
              f"loaded weights {result['loaded_weight_bytes'] / 2**30:.2f} GiB")
        for row in result["rows"]:
            print(_line(row), flush=True)
        if result["profile"]:
            p = result["profile"]
            print(f"profile of one c = 1 request: {p['steps']} decode steps, {p['steps_s']:.3f} s (profiler on), of which "
                  f"{p['op_self_s']:.3f} s in torch ops, {p['matmul_self_s']:.3f} s in matmul ops; top ops (self s):")
            for op, seconds in p["top_ops_self_s"].items():
                print(f"  {op}: {seconds:.3f}")
    out = {"tiny": args.tiny, "frames": args.frames, "load_average": load, "cores": os.cpu_count(),
           "threads": torch.get_num_threads(), "families": results}
    write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
