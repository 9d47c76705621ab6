"""Which weight layout `torch._int_mm` reads faster on this CPU at the row counts of a decode step: the int8 weight
contiguous as [in, out], or held as nn.Linear holds it, [out, in], and passed transposed (what
stages/layers/int8_linear.py does). Also the whole Int8DynamicLinear call beside the Int4WeightLinear call
(`quantize: int4-weight`) and a float32 F.linear of the shape.

Why: at one row (c = 1) a decode step's int8 products read every weight once, so the kernel's read rate is the step's
speed. The shapes are Qwen3-TTS 0.6B's (hidden 1024, q 2048, kv 1024, intermediate 3072). Weights are cycled over
enough copies (--megabytes in all) that each call reads them cold, as a step does; the layouts alternate within
each of --repeats rounds and the best round of each is kept.

    python bench/int8_layout.py [--rows 1,2,4,16,64 --repeats 5 --megabytes 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import write_json  # noqa: E402
from vocalis.stages.layers.int4_linear import Int4WeightLinear  # noqa: E402
from vocalis.stages.layers.int8_linear import Int8DynamicLinear  # noqa: E402

SHAPES = ((1024, 2048), (1024, 1024), (2048, 1024), (1024, 3072), (3072, 1024))
"""(in, out) of Qwen3-TTS 0.6B's linears: q; k and v; o; gate and up; down."""


def _seconds(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(inner: int, outer: int, rows: list[int], repeats: int, megabytes: int) -> list[dict]:
    copies = max(4, megabytes * 2**20 // (inner * outer))
    generator = torch.Generator().manual_seed(0)
    out_in = [torch.randint(-127, 128, (outer, inner), dtype=torch.int8, generator=generator) for _ in range(copies)]
    in_out = [w.t().contiguous() for w in out_in]
    modules, int4_modules = [], []
    for index, weight in enumerate(out_in):
        linear = nn.Linear(inner, outer, bias=False)
        linear.weight.data = weight.float() * 0.01
        int4_modules.append(Int4WeightLinear(linear))  # half the int8 bytes: every copy, so it reads cold too
        if index < max(4, copies // 4):  # a float32 linear per copy: 4x the bytes, so fewer copies
            modules.append((linear.weight.data, Int8DynamicLinear(linear)))
    results = []
    for n in rows:
        x8 = torch.randint(-127, 128, (n, inner), dtype=torch.int8, generator=generator)
        x = torch.randn(n, inner, generator=generator)
        calls = {
            "in_out_us": (lambda x8=x8: [torch._int_mm(x8, w) for w in in_out], copies),
            "out_in_t_us": (lambda x8=x8: [torch._int_mm(x8, w.t()) for w in out_in], copies),
            "int8_linear_us": (lambda x=x: [m(x) for _, m in modules], len(modules)),
            "int4_linear_us": (lambda x=x: [m(x) for m in int4_modules], len(int4_modules)),
            "float32_linear_us": (lambda x=x: [F.linear(x, w) for w, _ in modules], len(modules)),
        }
        best = {name: float("inf") for name in calls}
        for call, _ in calls.values():
            call()  # warm-up
        for _ in range(repeats):
            for name, (call, count) in calls.items():
                best[name] = min(best[name], _seconds(call) / count * 1e6)
        row = {"in": inner, "out": outer, "rows": n, **best}
        row["out_in_over_in_out"] = best["out_in_t_us"] / best["in_out_us"]
        row["out_in_read_gb_s"] = inner * outer / best["out_in_t_us"] / 1e3
        results.append(row)
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,2,4,16,64")
    parser.add_argument("--shapes", default=",".join(f"{i}x{o}" for i, o in SHAPES), help="in x out, comma separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=256, help="int8 weight bytes cycled per shape")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "int8_layout.json")
    args = parser.parse_args(argv)
    rows = [int(r) for r in args.rows.split(",")]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    results = [r for inner, outer in shapes for r in measure(inner, outer, rows, args.repeats, args.megabytes)]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; best of {args.repeats} rounds, µs per call")
    print("| in x out | rows | [in, out] | [out, in]ᵀ | ratio | read GB/s | Int8DynamicLinear | Int4WeightLinear | int4 / int8 "
          "| float32 F.linear |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['in']}x{r['out']} | {r['rows']} | {r['in_out_us']:.0f} | {r['out_in_t_us']:.0f} | "
              f"{r['out_in_over_in_out']:.2f} | {r['out_in_read_gb_s']:.1f} | {r['int8_linear_us']:.0f} | "
              f"{r['int4_linear_us']:.0f} | {r['int4_linear_us'] / r['int8_linear_us']:.2f} | {r['float32_linear_us']:.0f} |")
    one_row = [r["out_in_over_in_out"] for r in results if r["rows"] == 1]
    print(f"[out, in]ᵀ over [in, out] at one row, median over shapes: {statistics.median(one_row):.2f}")
    result = {"torch": torch.__version__, "threads": torch.get_num_threads(), "repeats": args.repeats,
              "megabytes": args.megabytes, "rows": results}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
