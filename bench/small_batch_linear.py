"""What a linear of a decode step costs on this CPU by batch rows: torch's F.linear against one call per row, against
MKL's prepacked weights (torch.ops.mkl._mkl_linear) and against oneDNN's (PackedLinear, the `packed_linears` deploy
default), float32 and bfloat16, on a real-size shape.

Why: bench/machine_limit.py found Qwen3-TTS 0.6B's float32 step at c = 4 "compute-bound" at 28 GFLOP/s. This shows
where that comes from: in float32 one row takes MKL's matrix-vector path, and two to eight rows its GEMM, which costs
about twice as much per call. Weights are cycled over 20 copies so that each call reads them cold, as a step does.

    python bench/small_batch_linear.py [--inner 1024 --outer 3072 --calls 100]
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
from vocalis.stages.layers.packed_linear import PackedLinear, available  # noqa: E402

ROWS = (1, 2, 3, 4, 8, 16, 64)
COPIES = 20


def per_call_us(fn: Callable[[], torch.Tensor], calls: int) -> float:
    for _ in range(5):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def cycling(weights: list[torch.Tensor], call: Callable[[int], torch.Tensor]) -> Callable[[], torch.Tensor]:
    turn = [0]

    def next_call() -> torch.Tensor:
        turn[0] = (turn[0] + 1) % len(weights)
        return call(turn[0])

    return next_call


def measure_rows(weights: list[torch.Tensor], rows: int, calls: int) -> dict:
    """One row of the table: `rows` input rows against the cycled `weights`."""
    dtype = weights[0].dtype
    x = torch.randn(rows, weights[0].shape[1], dtype=dtype)
    row: dict = {"dtype": str(dtype).removeprefix("torch."), "rows": rows}
    row["linear_us"] = per_call_us(cycling(weights, lambda i: F.linear(x, weights[i])), calls)
    row["per_row_us"] = per_call_us(
        cycling(weights, lambda i: torch.cat([F.linear(x[r : r + 1], weights[i]) for r in range(rows)])), calls
    )
    if dtype == torch.float32 and torch.backends.mkl.is_available():  # prepacking is MKL's (x86 builds)
        packed = [torch.ops.mkl._mkl_reorder_linear_weight(w, rows) for w in weights]
        row["mkl_packed_us"] = per_call_us(
            cycling(weights, lambda i: torch.ops.mkl._mkl_linear(x, packed[i], weights[i], None, rows)), calls
        )
        row["mkl_packed_bytes_ratio"] = packed[0].numel() * packed[0].element_size() / (weights[0].numel() * 4)
        prepacked = torch.ops.mkl._mkl_linear(x, packed[0], weights[0], None, rows)
        row["mkl_packed_max_diff"] = float((F.linear(x, weights[0]) - prepacked).abs().max())
    if available(dtype):
        layers = []
        for w in weights:
            linear = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=dtype)
            linear.weight.data = w
            layers.append(PackedLinear(linear))
        with torch.inference_mode():
            row["onednn_packed_us"] = per_call_us(cycling(weights, lambda i: layers[i](x)), calls)
            row["onednn_packed_max_diff"] = float((F.linear(x, weights[0]).float() - layers[0](x).float()).abs().max())
        row["onednn_gb_per_s"] = weights[0].numel() * weights[0].element_size() / row["onednn_packed_us"] / 1e3
    row["weight_gb_per_s"] = weights[0].numel() * weights[0].element_size() / row["linear_us"] / 1e3
    return row


def measure(inner: int, outer: int, calls: int, repeats: int = 1) -> list[dict]:
    """Each row measured in `repeats` rounds (every kernel in turn within a round); each figure the rounds' median."""
    torch.manual_seed(0)
    table = []
    for dtype in (torch.float32, torch.bfloat16):
        weights = [torch.randn(outer, inner, dtype=dtype) for _ in range(COPIES)]
        for rows in ROWS:
            rounds = [measure_rows(weights, rows, calls) for _ in range(repeats)]
            table.append({key: statistics.median(r[key] for r in rounds) if isinstance(value, float) else value
                          for key, value in rounds[0].items()})
    return table


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", type=int, default=1024)
    parser.add_argument("--outer", type=int, default=3072)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each figure is their median")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "small_batch_linear.json")
    args = parser.parse_args(argv)
    rows = measure(args.inner, args.outer, args.calls, args.repeats)
    print(f"F.linear [rows, {args.inner}] x [{args.outer}, {args.inner}], torch threads {torch.get_num_threads()}")
    print("| dtype | rows | F.linear us | one call per row us | MKL prepacked us | oneDNN packed us | F.linear / oneDNN | "
          "weight GB/s (F.linear, oneDNN) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        packed = f"{r['mkl_packed_us']:.0f}" if "mkl_packed_us" in r else "—"
        onednn = f"{r['onednn_packed_us']:.0f} | {r['linear_us'] / r['onednn_packed_us']:.2f}" if "onednn_packed_us" in r else "— | —"
        rate = f"{r['weight_gb_per_s']:.1f}, {r['onednn_gb_per_s']:.1f}" if "onednn_gb_per_s" in r else f"{r['weight_gb_per_s']:.1f}"
        print(f"| {r['dtype']} | {r['rows']} | {r['linear_us']:.0f} | {r['per_row_us']:.0f} | {packed} | {onednn} | {rate} |")
    write_json(args.out, {"inner": args.inner, "outer": args.outer, "threads": torch.get_num_threads(), "repeats": args.repeats,
                          "rows": rows})
    return rows


if __name__ == "__main__":
    main()
