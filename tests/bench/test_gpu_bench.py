"""bench/gpu.py end to end on CPU with the tiny checkpoints, so the GPU benchmark cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import gpu as bench

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_bench_runs_every_family_on_cpu_tiny(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    bench.main(["--device", "cpu", "--tiny", "--levels", "1,2", "--frames", "3", "--rounds", "1", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert {r["family"] for r in rows} == set(bench.CASES)
    assert {(r["family"], r["concurrency"]) for r in rows} == {(f, c) for f in bench.CASES for c in (1, 2)}
    for r in rows:
        assert r["audio_s_per_s"] > 0 and 0 < r["ttfa_p50_s"] <= r["ttfa_p99_s"] and r["rtf_p50"] > 0, r
        if r["family"] not in ("omnivoice", "auk"):  # the autoregressive families report their KV memory per stream
            assert 0 < r["kv_bytes_per_stream"] < r["kv_cache_bytes"], r
    printed = capsys.readouterr().out
    assert "| qwen3-1.7b-base | 2 |" in printed and "KV KiB/stream" in printed


def test_a_family_without_real_sizes_is_left_out_of_a_real_size_run_and_refused_by_name():
    assert "drama-3" in bench.CASES and "drama-3" in bench.NO_REAL_SIZES
    with pytest.raises(SystemExit, match=r"drama-3: no real-size checkpoint.*--tiny"):
        bench.build_real("drama-3", ROOT / "nonexistent", "cpu")
