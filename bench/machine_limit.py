"""How close a family's generator step comes to what this CPU can do at all: the step's matmuls at the CPU's own
matmul rate (float32 and bfloat16) and its weight bytes over the measured memory bandwidth, beside Vocalis's step.

The step's matmuls come from one of two places. For Qwen3-TTS 0.6B CustomVoice they are derived from the config
(STEPS: the work a frame needs, no more). For every other family in bench/real_size_cpu.py they are recorded: one
step that ran all c sequences is profiled with its input shapes, and its matrix products (aten::mm, aten::addmm and
mkldnn::_linear_pointwise, the ops a linear layer ends in: MATMUL_SHAPES) are the step, as run (padding included;
attention and other ops left out). For the
derived family the recorded GFLOP are reported beside the derived ones, so any work beyond the frame's shows.

For Qwen3-TTS 0.6B CustomVoice the step is one talker forward plus its code predictor's 15 passes per frame (the
first on two positions: the talker's hidden state and code 0's embedding). From the real-size config it derives the
step's matmul shapes, FLOPs and weight bytes at each concurrency c; then, in one process:
1. times the stages' linear kernel on each of those shapes (`linear`: PackedLinear where oneDNN runs the dtype, the
   `packed_linears` default, else nn.Linear; float32 and bfloat16, best of --repeats), giving the compute-bound time
   per step (every matmul at the rate this CPU reaches on its shape, weights hot);
2. measures the memory bandwidth with a large tensor copy (bytes read plus bytes written over time), giving the
   bandwidth-bound time per step (the weights a step reads, in the loaded dtype, over that bandwidth: at c = 1
   every weight is read once per use; the code predictor's ~300 MB does not stay in cache between its passes);
3. loads the real-size random checkpoint (bench/real_size_cpu.py builds it into --work-dir, reused when there)
   through the family loader and times the generator stage's steps (the first after a voice's prepare stage; AuK:
   its flow's Euler steps, the thinker before it runs once a request) while c greedy requests run through the pipeline;
   beside the median of all of them, the median of the steps no other stage stepped beside (a decoder stage shares
   the two cores with the generator's steps it overlaps: "alone");
4. prints limit / measured per c, where the limit is the larger of the two bounds, and replay / measured, where the
   replay is the step's matmuls alone run in order on distinct (cold) weights of the real sizes.

    python bench/machine_limit.py                    # real size, c = 1 and 4
    python bench/machine_limit.py --tiny --frames 3  # CI-sized: the committed tiny checkpoint
    python bench/machine_limit.py --profile          # also a torch.profiler table of one c = 1 request's steps
    python bench/machine_limit.py --families omnivoice,voxcpm2 --steps 4   # recorded steps
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import real_size_cpu  # noqa: E402
from bench.report import write_json  # noqa: E402
from bench.stage_weights import model_weight_bytes  # noqa: E402
from vocalis.stages.layers.packed_linear import PackedLinear  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ALONE_SHARE = 0.05
"""A step is timed as alone when another stage stepped beside it for less than this share of its time."""
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
"""Families whose step is derived from the config; the others' steps are recorded (recorded_matmuls)."""

MATMUL_SHAPES = ("aten::mm", "aten::addmm", "mkldnn::_linear_pointwise")
"""The ops a recorded step's matrix products are read from: a linear layer's product ends in one of them on CPU (the
last a PackedLinear's)."""


def recorded_matmuls(events) -> list[Matmul]:
    """The matrix products of one profiled step (torch.profiler key averages grouped by input shape): mm's operands
    are [rows, inner] and [inner, outer]; addmm's are the bias, then those two."""
    out = []
    for event in events:
        if event.key not in MATMUL_SHAPES:
            continue
        if event.key == "mkldnn::_linear_pointwise":  # [rows, inner] and the weight [outer, inner]
            (rows, inner), (outer, _) = event.input_shapes[0], event.input_shapes[1]
        else:
            shapes = event.input_shapes if event.key == "aten::mm" else event.input_shapes[1:]
            (rows, inner), (_, outer) = shapes[0], shapes[1]
        out.append(Matmul(f"{event.key} {rows}x{inner}x{outer}", rows, inner, outer, event.count, event.count))
    return sorted(out, key=lambda m: -m.flops)


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


def linear(outer: int, inner: int, dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """A random [outer, inner] linear run through the kernel the stages run it with: a PackedLinear where oneDNN runs
    `dtype` here (the `packed_linears` default), else F.linear."""
    layer = nn.Linear(inner, outer, bias=False).to(dtype)
    return PackedLinear(layer) if PackedLinear.accepts(layer) else layer


def matmul_seconds(rows: int, inner: int, outer: int, dtype: torch.dtype, repeats: int) -> float:
    """Seconds of one product of that shape through the stages' kernel (`linear`), weights hot."""
    x = torch.randn(rows, inner).to(dtype)
    product = linear(outer, inner, dtype)
    calls = max(1, int(2e8 // (2 * rows * inner * outer)))  # ~0.2 GFLOP per timing
    with torch.inference_mode():
        return _best(lambda: product(x), repeats, min(calls, 200))


COLD_BYTES = 96 * 2**20
"""Weights of one shape cycled over at least this many bytes are read cold (3x this machine's 32 MiB L3)."""


def replay_seconds(step: list[Matmul], dtype: torch.dtype, repeats: int) -> float:
    """Seconds of the step's matmuls alone, in order, each use on its own layer's weight (cold, as in a real step,
    where the weights a step reads do not fit in cache): the rate torch's kernels reach on the step as a whole.
    A shape's uses cycle over at most enough distinct weights to fill COLD_BYTES, which keeps them cold."""
    def copies(m: Matmul) -> int:
        return min(m.distinct, max(1, -(-COLD_BYTES // (m.inner * m.outer * dtype.itemsize))))

    with torch.inference_mode():
        weights = [[linear(m.outer, m.inner, dtype) for _ in range(copies(m))] for m in step]
    inputs = [torch.randn(m.rows, m.inner).to(dtype) for m in step]

    def run() -> None:
        for m, ws, x in zip(step, weights, inputs, strict=True):
            for use in range(m.count):
                ws[use % len(ws)](x)

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


def generator_stage(model, key: str):
    """The stage whose steps are timed: the family's `timed_stage`, else the first that generates (a voice or prompt
    stage before it only prepares)."""
    from vocalis.stages.runtime.prepare import PrepareStage

    named = real_size_cpu.FAMILIES[key].timed_stage
    stages = model.pipeline.stages
    if named is None:
        return next(s for s in stages if not isinstance(s, PrepareStage))
    for stage in stages:
        if stage.name == named:
            return stage
    raise SystemExit(f"{key}: its timed_stage {named!r} is none of its stages ({', '.join(s.name for s in stages)})")


@dataclass
class StepRun:
    batch: int
    """The batch size of the timed steps: c where the stage ran all c sequences at once, else the largest it ran (an
    admission that finds batching does not pay, item 3, serves fewer at a time)."""
    durations: list[float]
    """Seconds of each generator step of that batch size (a recorded step left out)."""
    beside: list[float]
    """For each of those steps, the share of its time during which another stage stepped beside it (the pipeline's
    SteppingClock): a step that shared the cores with a decoder's takes longer for that alone."""
    ops: dict[str, float]
    """With `profile`: self CPU seconds per torch op over those steps but the first."""
    recorded: list[Matmul]
    """With `record`: the matrix products of one step of that batch size, a later one than its first."""


def time_steps(model, key: str, c: int, frames: int, steps: int, profile: bool = False, record: bool = False) -> StepRun:
    """Times the generator stage's steps while c requests of `frames` frames (OmniVoice: `steps` passes) run; see
    StepRun. Profiling is on the stage's own thread."""
    stage = generator_stage(model, key)
    inner = stage.step
    stepping = next(worker.stepping for worker in model.pipeline.workers if worker.stage is stage)
    durations: dict[int, list[float]] = {}
    beside: dict[int, list[float]] = {}
    recorded: dict[int, list[Matmul]] = {}
    ops: dict[str, float] = {}
    before = 0
    """The batch size of the step before: what the next step most likely runs."""

    def timed():
        nonlocal before
        expected = before
        # a decode step, not the prompt's: the second step of a batch size or later
        recording = record and expected not in recorded and len(durations.get(expected, [])) >= 1
        mark = stepping.mark()
        start = time.perf_counter()
        if profile or recording:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=recording) as prof:
                out = inner()
        else:
            out = inner()
        elapsed = time.perf_counter() - start
        share = stepping.beside_since(mark)
        batch = before = len(stage.batch_requests())
        if batch == 0 or recording:  # a recorded step's time holds the profiler's
            if recording and batch == expected:
                recorded[batch] = recorded_matmuls(prof.key_averages(group_by_input_shape=True))
            return out
        durations.setdefault(batch, []).append(elapsed)
        beside.setdefault(batch, []).append(share)
        if profile and batch == c and len(durations[batch]) > 1:  # the first is the prompt step: decode steps only
            for event in prof.key_averages():
                ops[event.key] = ops.get(event.key, 0.0) + event.self_cpu_time_total / 1e6
        return out

    family = real_size_cpu.FAMILIES[key]

    async def requests():
        await asyncio.gather(*(real_size_cpu.one(model, family, frames, steps) for _ in range(c)))

    stage.step = timed
    try:
        asyncio.run(requests())
    finally:
        stage.step = inner
    batches = [b for b in durations if b <= c and (b in recorded or not record)]
    if not batches:
        raise RuntimeError(f"{key}: no decode step was recorded at c = {c}; give the requests more frames or steps")
    batch = max(batches)
    return StepRun(batch, durations[batch], beside[batch], ops, recorded.get(batch, []))


def run(key: str, checkpoint: Path, levels: list[int], frames: int, steps: int, repeats: int, dtype: str,
        profile: bool) -> dict:
    from vocalis.stages.models.registry import load_model

    model = load_model(str(checkpoint), stage_overrides=json.dumps(real_size_cpu.stage_overrides(dtype, max(levels), real_size_cpu.FAMILIES[key].dtype_stages)))
    try:
        loaded_bytes = model_weight_bytes(model)
        time_steps(model, key, 1, 2, steps)  # warm-up
        runs = {c: time_steps(model, key, c, frames, steps, record=True) for c in levels}
        profiled = None
        if profile:
            p = time_steps(model, key, 1, frames, steps, profile=True)
            top = dict(sorted(p.ops.items(), key=lambda kv: -kv[1])[:20])
            profiled = {"steps": len(p.durations) - 1, "steps_s": sum(p.durations[1:]), "op_self_s": sum(p.ops.values()),
                        "matmul_self_s": sum(v for k, v in p.ops.items() if k.startswith(MATMUL_OPS)), "top_ops_self_s": top}
    finally:
        model.close()
        del model
        gc.collect()  # the replay's weights below are not held beside the model's
    bandwidth = copy_bandwidth(repeats)
    derived = key in STEPS
    config = json.loads((checkpoint / "config.json").read_text()) if derived else None  # a derived step's sizes
    machine = {c: limits(STEPS[key](config, runs[c].batch) if derived else runs[c].recorded, repeats, bandwidth) for c in levels}
    measured = {c: runs[c].durations for c in levels}
    rows = []
    for c in levels:
        step_s = statistics.median(measured[c])
        alone = [d for d, share in zip(measured[c], runs[c].beside, strict=True) if share < ALONE_SHARE]
        for name, lim in machine[c].items():
            bound = max(lim["compute_s"], lim["bandwidth_s"])
            rows.append({"family": key, "concurrency": c, "batch": runs[c].batch, "limit_dtype": name, "vocalis_dtype": dtype, "step_s": step_s,
                         "steps": len(measured[c]), "steps_alone": len(alone),
                         "step_alone_s": statistics.median(alone) if alone else None,
                         "beside_share": statistics.mean(runs[c].beside), "compute_s": lim["compute_s"], "bandwidth_s": lim["bandwidth_s"],
                         "limit_s": bound, "fraction": bound / step_s, "replay_s": lim["replay_s"],
                         "replay_fraction": lim["replay_s"] / step_s, "gflops": lim["flops"] / 1e9,
                         "weight_bytes": lim["weight_bytes"], "gflops_at_compute_bound": lim["gflops_at_compute_bound"],
                         "achieved_gflops": lim["flops"] / step_s / 1e9, "shapes": lim["shapes"],
                         "step_from": "derived" if derived else "recorded",
                         "recorded_gflops": sum(m.flops for m in runs[c].recorded) / 1e9})
    return {"bandwidth_bytes_per_s": bandwidth, "loaded_weight_bytes": loaded_bytes, "rows": rows, "profile": profiled}


def _line(r: dict) -> str:
    batch = "" if r["batch"] == r["concurrency"] else f" (steps of {r['batch']})"
    alone = "-" if r["step_alone_s"] is None else f"{1000 * r['step_alone_s']:.0f} ({r['steps_alone']})"
    return (f"| {r['family']} | {r['concurrency']}{batch} | {r['limit_dtype']} | {r['gflops']:.2f} | {r['weight_bytes'] / 2**30:.2f} | "
            f"{r['gflops_at_compute_bound']:.1f} | {1000 * r['compute_s']:.0f} | {1000 * r['bandwidth_s']:.0f} | "
            f"{1000 * r['replay_s']:.0f} | {1000 * r['step_s']:.0f} ({r['vocalis_dtype']}) | {r['achieved_gflops']:.1f} | "
            f"{r['fraction']:.2f} | {r['replay_fraction']:.2f} | {r['step_from']} | {r['recorded_gflops']:.2f} | {alone} | "
            f"{r['beside_share']:.2f} |")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(STEPS), help=f"of {', '.join(real_size_cpu.FAMILIES)}")
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=8, help="frames per request while steps are timed")
    parser.add_argument("--steps", "--omnivoice-steps", dest="steps", type=int, default=4,
                        help="OmniVoice's unmasking passes per request; AuK's flow steps (--omnivoice-steps: its older name)")
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
          "bandwidth-bound ms | matmul replay ms | Vocalis step ms | Vocalis GFLOP/s | limit/measured | replay/measured | "
          "step shapes | recorded GFLOP/step | Vocalis step ms alone (steps) | another stage beside, share of step time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = {}
    for key in args.families.split(","):
        family = real_size_cpu.FAMILIES[key]
        if not args.tiny:
            checkpoint = args.work_dir / key
            real_size_cpu.build(key, checkpoint)
        elif family.built:  # bench/gpu.py's tiny checkpoint, built or copied into the work dir
            checkpoint = args.work_dir / family.tiny
            real_size_cpu.build(key, checkpoint, tiny=True)
        else:
            checkpoint = family.tiny
        result = run(key, checkpoint, levels, args.frames, args.steps, args.repeats, args.vocalis_dtype, args.profile)
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
