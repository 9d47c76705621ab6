"""bench/gpu.py end to end on CPU with the tiny checkpoints, so the GPU benchmark cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import gpu as bench

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_bench_dry_run_runs_every_section_on_cpu(tmp_path, capsys):
    """--dry-run: the device check of every family (the CPU as the device: each stage's float32 equals the CPU's, so
    every verdict is ok), CUDA graphs on and off, and every family served, with their tables."""
    from bench.half_precision_drift import CASES as PARITY_CASES

    out = tmp_path / "gpu.json"
    bench.main(["--dry-run", "--work-dir", str(tmp_path / "work"), "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["dry_run"] and result["skipped"] == []
    parity = result["parity"]
    assert {(r["family"], r["dtype"]) for r in parity} == {(f, d) for f in PARITY_CASES for d in ("float32", "bfloat16")}
    for r in parity:
        assert r["verdict"] == ("ok" if r["dtype"] == "float32" else "reported"), r
        assert r["samples"][0] > 0 and r["samples"][0] == r["samples"][1], r
        if r["dtype"] == "float32":
            assert r["error"] in (0.0, None) and r["audio_ser_db"] == float("inf"), r
    assert any(r["floor"] for r in parity)  # the float64 runs measured a floor where there are logits or latents
    graphs = result["graphs"]
    assert {(r["family"], r["graphs"], r["concurrency"]) for r in graphs} == {("qwen3-1.7b-base", g, c) for g in ("on", "off") for c in (1, 2)}
    families = result["families"]
    assert {(r["family"], r["concurrency"]) for r in families} == {(f, c) for f in bench.CASES for c in (1, 2)}
    for r in graphs + families:
        assert r["audio_s_per_s"] > 0 and 0 < r["ttfa_p50_s"] <= r["ttfa_p99_s"] and r["rtf_p50"] > 0, r
        assert r["weight_bytes"] > 0 and r["device_peak_bytes"] is None, r  # no device memory to read on the CPU
        if r["family"] not in ("omnivoice", "auk"):  # the autoregressive families report their KV memory per stream
            assert 0 < r["kv_bytes_per_stream"] < r["kv_cache_bytes"], r
    printed = capsys.readouterr().out
    assert "| qwen3-1.7b-base | 2 |" in printed and "| qwen3-1.7b-base | off | 2 |" in printed and "| voxcpm2 | float32 |" in printed


def test_gpu_bench_starts_no_work_past_its_budget(tmp_path):
    out = tmp_path / "gpu.json"
    result = bench.main(["--dry-run", "--budget-s", "0", "--work-dir", str(tmp_path / "work"), "--out", str(out)])
    assert result["parity"] == result["graphs"] == result["families"] == []
    assert result["skipped"][0] == "parity qwen3_tts" and "graphs qwen3-1.7b-base" in result["skipped"]
    assert {s.removeprefix("family ") for s in result["skipped"] if s.startswith("family ")} == set(bench.CASES)


def test_drama3_is_left_out_of_a_default_real_size_run_and_only_it_builds_shallower():
    """Drama 3's sizes are assumed and its whole model is ~33 GiB of FP8 experts: named only, and only it takes a
    depth (tests/bench/test_drama3_build_bench.py builds one)."""
    assert "drama-3" in bench.CASES and "drama-3" in bench.NO_REAL_SIZES
    with pytest.raises(SystemExit, match=r"voxcpm2: only drama-3 builds a shallower checkpoint"):
        bench.build_real("voxcpm2", ROOT / "nonexistent", "cpu", layers=8)


def test_gepards_real_sizes_give_its_published_backbone(tmp_path):
    """bench/configs/gepard_real_sizes.json over the tiny checkpoint: the vendor's 14 full-attention layers of width 1024
    with 8 / 2 heads and full rotary, the published special and speaker ids, and with the assumed widths the ~0.5 B
    backbone parameters the parity survey records (counted on the meta device: nothing allocated)."""
    import torch

    from vocalis.stages.models.gepard.config import SIDECAR, GepardConfig
    from vocalis.stages.models.gepard.talker import GepardTalker

    tiny = bench.tiny_checkpoint("gepard", tmp_path)
    sizes = json.loads((ROOT / "bench" / "configs" / "gepard_real_sizes.json").read_text())
    config = GepardConfig.from_dict(bench._overlay(json.loads((tiny / "config.json").read_text()), sizes["config"]),
                                    bench._overlay(json.loads((tiny / SIDECAR).read_text()), sizes["sidecar"]))
    backbone = config.backbone
    assert (backbone.num_hidden_layers, backbone.hidden_size, backbone.num_attention_heads, backbone.num_key_value_heads) == (14, 1024, 8, 2)
    assert set(backbone.layer_types) == {"full_attention"} and backbone.partial_rotary_factor == 1.0
    assert (config.start_of_speech, config.speaker_token_base, config.num_speaker_prefix, config.audio_embed_dim) == (248070, 248077, 8, 32)
    with torch.device("meta"):
        talker = GepardTalker(config)
    assert 0.50e9 < sum(p.numel() for p in talker.model.parameters()) < 0.53e9


def test_the_builders_writer_reads_back_as_safetensors_writes(tmp_path):
    """bench/gpu.py's save_file streams tensors from their own memory; safetensors reads back each one (tied and
    strided tensors, bfloat16, integers, empty and scalar ones) as it was."""
    import torch
    from safetensors.torch import load_file

    tensors = {"w": torch.randn(3, 5).to(torch.bfloat16), "ids": torch.arange(4), "none": torch.zeros(0, 2),
               "scalar": torch.tensor(3.0), "strided": torch.randn(4, 6)[:, ::2], "flag": torch.tensor([True, False])}
    tensors["tied"] = tensors["w"]
    bench.save_file(tensors, tmp_path / "m.safetensors")
    read = load_file(str(tmp_path / "m.safetensors"))
    assert set(read) == set(tensors)
    for name, tensor in tensors.items():
        assert read[name].dtype == tensor.dtype and torch.equal(read[name], tensor), name
