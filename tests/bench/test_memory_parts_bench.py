"""bench/memory_parts.py on tiny checkpoints, so the memory breakdown cannot rot, and its parts add up."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench

BUDGET = 64 * 2**20


def test_memory_parts_add_up_on_tiny_checkpoints(tmp_path, capsys):
    bench = load_bench("memory_parts")
    out = tmp_path / "memory.json"
    families = ["qwen3-0.6b-customvoice", "omnivoice"]
    bench.main(["--tiny", "--families", ",".join(families), "--frames", "2", "--kv-cache-bytes", str(BUDGET),
                "--work-dir", str(tmp_path), "--out", str(out)])
    rows = {r["family"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == set(families)
    for r in rows.values():
        assert r["rest_bytes"] == r["peak_rss_bytes"] - r["weights_bytes"] - r["budget_bytes"], r
        assert r["weights_bytes"] > 2**20, r  # tiny, but not nothing
        assert 0 < r["before_load_rss_bytes"] < r["after_load_rss_bytes"] <= r["load_peak_rss_bytes"] <= r["peak_rss_bytes"], r
        assert r["after_request_rss_bytes"] <= r["peak_rss_bytes"], r
    # the autoregressive talker reserves (nearly all of) the budget it was given, OmniVoice's generator none; on CPU
    # the blocks become resident only as they are used (kv_cache.py), so the load alone does not hold the budget
    assert BUDGET - 2**20 < rows["qwen3-0.6b-customvoice"]["budget_bytes"] <= BUDGET
    assert rows["omnivoice"]["budget_bytes"] == 0
    assert rows["qwen3-0.6b-customvoice"]["after_load_rss_bytes"] - rows["qwen3-0.6b-customvoice"]["before_load_rss_bytes"] < BUDGET
    printed = capsys.readouterr().out
    assert "| qwen3-0.6b-customvoice | float32 |" in printed and "| rest |" in printed


def test_the_generator_stage_gets_the_dtype_and_the_budget():
    bench = load_bench("memory_parts")
    assert bench.overrides("voxcpm2", "bfloat16", 4, 123)["0"] == {"device": "cpu", "dtype": "bfloat16", "max_num_seqs": 4,
                                                                     "kv_cache_bytes": 123}
    auk = bench.overrides("auk", "bfloat16", 4)
    # AuK's condition stage holds most of its weights (the thinker): it takes the dtype too
    assert auk["1"]["dtype"] == "bfloat16" and auk["0"]["dtype"] == "bfloat16" and "kv_cache_bytes" not in auk["1"]
