"""bench/heap_reuse.py at CI size: every heap variant on both sessions, each in its own child process."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_heap_reuse_times_every_variant_on_both_sessions(tmp_path, capsys):
    out = tmp_path / "heap.json"
    bench = load_bench("heap_reuse")
    bench.main(["--reps", "1", "--passes", "1", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["session"], r["variant"]) for r in rows] == [(s, v) for s in bench.SESSIONS for v in bench.VARIANTS]
    assert all(len(r["seconds"]) == 1 and r["seconds"][0] > 0 for r in rows)
    assert all(r["ratio_to_kept"] == 1.0 for r in rows if r["variant"] == "kept")
    assert "| one thread | kept, trimmed |" in capsys.readouterr().out
