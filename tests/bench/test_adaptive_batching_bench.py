"""bench/adaptive_batching.py end to end, small: the tiny OmniVoice checkpoint and the synthetic matmul stage, so the
benchmark cannot rot."""

from __future__ import annotations

import json

import pytest

from tests.bench.bench_script import load_bench


@pytest.mark.parametrize("mode", [["--tiny"], ["--synthetic", "--steps", "2"]])
def test_the_bench_runs_both_modes_and_reports_each_request(tmp_path, mode):
    out = tmp_path / "runs.json"
    load_bench("adaptive_batching").main([*mode, "--clients", "2", "--repeats", "1", "--out", str(out)])
    runs = json.loads(out.read_text())["runs"]
    assert sorted(run["adaptive"] for run in runs) == [False, True]
    for run in runs:
        assert len(run["ttfa_s"]) == 2 and all(0 < t <= run["wall_s"] + 1e-6 for t in run["ttfa_s"])
        assert run["alone_s"] > 0 and run["audio_s_per_s"] > 0
    off = next(run for run in runs if not run["adaptive"])
    assert all(value is None for value in off["ratio"].values())  # off: nothing measured
