"""bench/adaptive_batching.py end to end, small: the tiny OmniVoice checkpoint and the synthetic matmul stage, so the
benchmark cannot rot."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_adaptive_batching", ROOT / "bench" / "adaptive_batching.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_adaptive_batching"] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize("mode", [["--tiny"], ["--synthetic", "--steps", "2"]])
def test_the_bench_runs_both_modes_and_reports_each_request(tmp_path, mode):
    out = tmp_path / "runs.json"
    load_bench().main([*mode, "--clients", "2", "--repeats", "1", "--out", str(out)])
    runs = json.loads(out.read_text())["runs"]
    assert sorted(run["adaptive"] for run in runs) == [False, True]
    for run in runs:
        assert len(run["ttfa_s"]) == 2 and all(0 < t <= run["wall_s"] + 1e-6 for t in run["ttfa_s"])
        assert run["alone_s"] > 0 and run["audio_s_per_s"] > 0
    off = next(run for run in runs if not run["adaptive"])
    assert all(value is None for value in off["ratio"].values())  # off: nothing measured
