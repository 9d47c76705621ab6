"""bench/int8_layout.py at CI size, so it cannot rot: both layouts, the int8 and int4 modules and float32 timed for every shape and
row count."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_int8_layout_times_both_layouts_at_every_row(tmp_path):
    out = tmp_path / "layout.json"
    load_bench("int8_layout").main(["--rows", "1,4", "--shapes", "64x96,96x32", "--repeats", "1", "--megabytes", "1",
                                    "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["in"], r["out"], r["rows"]) for r in rows] == [(64, 96, 1), (64, 96, 4), (96, 32, 1), (96, 32, 4)]
    timed = ("in_out_us", "out_in_t_us", "int8_linear_us", "int4_linear_us", "float32_linear_us")
    assert all(0 < r[name] < 1e6 for r in rows for name in timed)
