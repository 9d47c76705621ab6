"""bench/drama3_tower_drift.py end to end on the tiny Drama 3 checkpoint, so the breakdown in BENCHMARKS.md cannot rot:
every forced run emits its recording's codes, every setting has each call position of a frame, and the split it
reports holds (float16's drift along the tower is its backbone states' error carried by the tower, not the
tower's own rounding)."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_the_breakdown_runs_and_splits_the_drift(tmp_path):
    out = tmp_path / "tower.json"
    load_bench("drama3_tower_drift").main(["--out", str(out)])
    result = json.loads(out.read_text())
    assert all(result["codes_equal"].values()), result["codes_equal"]
    table = result["per_position"]
    positions = ["main", *(f"code {k}" for k in range(1, 10))]  # the tiny checkpoint's ten codebooks
    assert all(list(row) == positions for row in table.values())
    last = "code 9"
    own = table["float16, tower fed float32's backbone states"][last][0]
    carried = table["float32, tower fed float16's backbone states"][last][0]
    # medians over the frames, each compared with the other setting's: which part dominates, not a tuned size
    assert own < carried
    assert table["tower x2/3: float32 vs float64"][last][0] < table["float32 vs float64"][last][0]
