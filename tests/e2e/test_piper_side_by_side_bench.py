"""bench/piper_side_by_side.py at CI size, so that the Piper comparison cannot rot: both servers started (each with its
onnxruntime runs timed), a closed-loop pair at two levels, the ceiling and the ~200-word TTFA rows measured, the tables
and the JSON written."""

from __future__ import annotations

import json
import signal

from tests.bench.bench_script import load_bench


def test_piper_side_by_side_runs_both_servers_and_the_ceiling(tmp_path, capsys):
    out, markdown = tmp_path / "side_by_side.json", tmp_path / "side_by_side.md"
    sigterm = signal.getsignal(signal.SIGTERM)  # main() sets its own, to stop both servers on `kill`
    try:
        load_bench("piper_side_by_side").main([
            "--concurrency", "1,2", "--reps", "1", "--requests", "2", "--ttfa-reps", "1", "--ttfa-prompts", "1", "--ceiling-texts", "4", "--quiet-wait", "0",
            "--retries", "0", "--onnx-times", "--out", str(out), "--markdown", str(markdown)])
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    result = json.loads(out.read_text())
    runs = {run["server"]: run for run in result["runs"] if run.get("concurrency") != 1}
    assert set(runs) == {"piper", "vocalis", "ceiling"}
    for run in (r for r in result["runs"] if r.get("concurrency") == 1):  # --onnx-times: both servers' model time
        assert 0 < run["onnx_s"] < sum(run["latencies_in_order"]), run
    for name in ("piper", "vocalis"):
        run = runs[name]
        assert run["concurrency"] == 2 and run["requests"] == run["ok"] == 2, run
        assert run["audio_s_per_s"] > 0 and run["latency_s"]["p50"] > 0, run
    assert 0 < runs["vocalis"]["ttfa_s"]["p50"] <= runs["vocalis"]["latency_s"]["p50"]  # it streams
    assert runs["ceiling"]["audio_s_per_s"] > 0
    assert len(result["ttfa"]) == 1
    for row in result["ttfa"]:
        assert row["words"] >= 150 and len(row["piper_s"]) == len(row["vocalis_ttfa_s"]) == 1, row
        assert 0 < row["vocalis_ttfa_s"][0] < row["vocalis_e2e_s"][0]
        assert len(row["clause_ttfa_s"]) == 1 and row["clause_ttfa_s"][0] > 0  # the gRPC server takes clause units
    tables = markdown.read_text()
    assert tables in capsys.readouterr().out
    assert "| 2 | 1 |" in tables and "~200-word prompt" in tables and "E2E, same prompt" in tables
    assert "Piper outside onnxruntime, ms" in tables
    assert all(len(runs[name]["latencies_in_order"]) == 2 and all(runs[name]["latencies_in_order"]) for name in ("piper", "vocalis"))
