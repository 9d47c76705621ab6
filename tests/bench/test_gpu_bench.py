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
