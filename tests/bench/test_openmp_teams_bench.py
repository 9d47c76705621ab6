"""bench/omp_region_cost.py and bench/openmp_teams_paired.py at CI size, so neither can rot: every layout and both
sides measured, each pair's ratios taken from its own two runs."""

from __future__ import annotations

import json

import pytest

from tests.bench.bench_script import load_bench


def test_omp_region_cost_times_every_layout(tmp_path, capsys):
    out = tmp_path / "regions.json"
    load_bench("omp_region_cost").main(["--calls", "50", "--repeats", "1", "--rounds", "1", "--regions", "100",
                                       "--out", str(out)])
    result = json.loads(out.read_text())
    rows = {r["layout"]: r for r in result["rows"]}
    assert list(rows) == ["main", "lone stage thread", "beside other teams"]
    assert all(r["us_per_call"] > 0 and len(r["runs_us"]) == 1 for r in rows.values())
    assert rows["main"]["extra_us"] == 0
    for r in rows.values():
        assert r["extra_ms_per_step"] == pytest.approx(r["extra_us"] * 100 / 1e3)
    assert "| beside other teams |" in capsys.readouterr().out


def test_openmp_teams_paired_runs_both_sides_on_the_tiny_checkpoint(tmp_path, capsys):
    out = tmp_path / "paired.json"
    load_bench("openmp_teams_paired").main(["--tiny", "--frames", "3", "--levels", "1,2", "--pairs", "2",
                                            "--out", str(out)])
    result = json.loads(out.read_text())
    assert [r["concurrency"] for r in result["rows"]] == [1, 2]
    for row in result["rows"]:
        assert len(row["pairs"]) == 2
        for pair, step, wall in zip(row["pairs"], row["step_ratio"], row["wall_ratio"], strict=True):
            assert set(pair) == {"kept", "released"}
            assert all(side["steps"] >= 1 and side["step_s"] > 0 and side["wall_s"] > 0 for side in pair.values())
            assert step == pair["released"]["step_s"] / pair["kept"]["step_s"]
            assert wall == pair["released"]["wall_s"] / pair["kept"]["wall_s"]
    assert "| 2 |" in capsys.readouterr().out
