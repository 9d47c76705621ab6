"""bench/small_batch_linear.py on a small shape, so it cannot rot: every row measured, MKL's and oneDNN's prepacked
linears agreeing with F.linear within the float32 bound of two summation orders."""

from __future__ import annotations

import json

import torch

from tests.bench.bench_script import load_bench


def test_small_batch_linear_measures_every_row(tmp_path):
    out = tmp_path / "linear.json"
    load_bench("small_batch_linear").main(["--inner", "64", "--outer", "96", "--calls", "2", "--out", str(out)])
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [(r["dtype"], r["rows"]) for r in rows] == [(d, n) for d in ("float32", "bfloat16") for n in (1, 2, 3, 4, 8, 16, 64)]
    assert all(r["linear_us"] > 0 and r["per_row_us"] > 0 for r in rows)
    # Two summation orders of 64 products differ by at most 64 * eps * sum|x w| (the standard bound); for standard
    # normals sum|x w| is about 0.64 * 64, taken as 64.
    bound = 64 * torch.finfo(torch.float32).eps * 64
    assert all(r["mkl_packed_max_diff"] <= bound for r in rows if "mkl_packed_max_diff" in r)
    assert torch.backends.mkl.is_available() == any("mkl_packed_us" in r for r in rows)
    assert all(r["onednn_packed_max_diff"] <= bound for r in rows if r["dtype"] == "float32")  # oneDNN runs float32 always
