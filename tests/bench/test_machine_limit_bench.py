"""bench/machine_limit.py on the tiny checkpoint, so the machine-limit benchmark cannot rot, and its step arithmetic."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from tests.bench.bench_script import load_bench

# Qwen3-TTS 0.6B's talker and code predictor (their published config), trimmed to what the step arithmetic reads.
LAYER = {"hidden_size": 1024, "intermediate_size": 3072, "head_dim": 128, "num_attention_heads": 16, "num_key_value_heads": 8}
QWEN3_06B = {"talker_config": LAYER | {"num_hidden_layers": 28, "vocab_size": 3072,
                                       "code_predictor_config": LAYER | {"num_hidden_layers": 5, "vocab_size": 2048, "num_code_groups": 16}}}


def test_machine_limit_runs_on_the_tiny_checkpoint(tmp_path, capsys):
    bench = load_bench("machine_limit")
    out = tmp_path / "limit.json"
    bench.main(["--tiny", "--frames", "12", "--levels", "1,2", "--repeats", "1", "--profile", "--out", str(out),
                "--families", "qwen3-0.6b-customvoice,omnivoice,auk", "--steps", "8", "--work-dir", str(tmp_path)])
    families = json.loads(out.read_text())["families"]
    result = families["qwen3-0.6b-customvoice"]
    rows = result["rows"]
    assert {(r["concurrency"], r["limit_dtype"]) for r in rows} == {(c, d) for c in (1, 2) for d in ("float32", "bfloat16")}
    for r in rows:
        assert r["steps"] >= 1 and r["step_s"] > 0 and r["compute_s"] > 0 and r["bandwidth_s"] > 0, r
        assert r["fraction"] == max(r["compute_s"], r["bandwidth_s"]) / r["step_s"], r
        assert r["replay_s"] > 0 and r["replay_fraction"] == r["replay_s"] / r["step_s"], r
        assert 0 <= r["beside_share"] <= 1 and 0 <= r["steps_alone"] <= r["steps"], r
        assert (r["step_alone_s"] is None) == (r["steps_alone"] == 0), r
    assert result["bandwidth_bytes_per_s"] > 1e8
    profile = result["profile"]
    assert profile["steps"] >= 1 and 0 < profile["matmul_self_s"] <= profile["op_self_s"]
    # the derived step is exactly the matrix products a decode step runs (recorded with their shapes)
    assert all(r["step_from"] == "derived" and r["recorded_gflops"] == r["gflops"] > 0 for r in rows), rows
    omnivoice = {(r["concurrency"], r["limit_dtype"]): r for r in families["omnivoice"]["rows"]}
    assert all(r["step_from"] == "recorded" and r["gflops"] == r["recorded_gflops"] > 0 for r in omnivoice.values())
    # b identical requests in one step: b times the products of one (no padding between equal rows); b is what the
    # stage chose to run at c = 2 (the step-cost admission may serve one at a time)
    two = omnivoice[(2, "float32")]
    assert 1 <= two["batch"] <= 2 and two["gflops"] == two["batch"] * omnivoice[(1, "float32")]["gflops"]
    assert all(r["batch"] == r["concurrency"] for r in rows)  # Qwen3-TTS's steps batch
    # AuK's timed stage is its flow (8 Euler steps a request), not the thinker before it (one prefill a request)
    auk = {(r["concurrency"], r["limit_dtype"]): r for r in families["auk"]["rows"]}
    assert auk[(1, "float32")]["steps"] >= 6 and auk[(1, "float32")]["recorded_gflops"] > 0, auk
    printed = capsys.readouterr().out
    # OmniVoice's row says the batch its stage ran when that was not c (its step-cost admission may step one at a time)
    shown = "2" if two["batch"] == 2 else "2 (steps of 1)"
    assert "| qwen3-0.6b-customvoice | 2 | bfloat16 |" in printed and f"| omnivoice | {shown} | float32 |" in printed


def test_qwen3_06b_step_is_about_3_5_gflop_and_1_65_billion_weights_per_frame():
    bench = load_bench("machine_limit")
    one = bench.qwen3_step(QWEN3_06B, 1)
    talker = 28 * (1024 * (2048 + 2 * 1024) + 2048 * 1024 + 3 * 1024 * 3072) + 1024 * 3072
    predictor_pass = 5 * (1024 * (2048 + 2 * 1024) + 2048 * 1024 + 3 * 1024 * 3072) + 1024 * 2048
    assert sum(m.weights for m in one) == talker + 15 * predictor_pass
    # the first predictor pass runs two positions (the talker's hidden state and code 0's embedding)
    flops = 2 * (talker + 15 * predictor_pass + (predictor_pass - 1024 * 2048))
    assert sum(m.flops for m in one) == flops
    assert 3.4e9 < flops < 3.6e9
    four = bench.qwen3_step(QWEN3_06B, 4)
    assert sum(m.flops for m in four) == 4 * flops and sum(m.weights for m in four) == sum(m.weights for m in one)


def test_a_timed_stage_that_names_none_of_the_stages_says_so(monkeypatch):
    bench = load_bench("machine_limit")
    families = bench.real_size_cpu.FAMILIES
    monkeypatch.setitem(families, "auk", dataclasses.replace(families["auk"], timed_stage="flw"))
    model = SimpleNamespace(pipeline=SimpleNamespace(stages=[SimpleNamespace(name=n) for n in ("condition", "flow")]))
    with pytest.raises(SystemExit, match=r"auk: its timed_stage 'flw' is none of its stages \(condition, flow\)"):
        bench.generator_stage(model, "auk")
