"""bench/runtime_vs_vllm.py without vLLM: the pair schedule and its ratios, and the Vocalis side on a tiny Qwen3."""

from __future__ import annotations

import json

import torch
from safetensors.torch import save_file

from tests.bench.bench_script import load_bench

CONFIG = {"vocab_size": 1000, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0}


def test_pairs_alternate_which_side_goes_first_and_take_ratios_within_each_pair():
    bench = load_bench("runtime_vs_vllm")
    calls: list[tuple[str, int]] = []
    speed = {"vocalis": iter([100.0, 200.0, 300.0, 400.0]), "vllm": iter([50.0, 100.0, 300.0, 100.0])}

    def side(name):
        def decode(batch):
            calls.append((name, batch))
            return {"tokens_per_s": next(speed[name]), "first_ids": [1, 2]}
        return decode

    runs = bench.run_pairs({"vocalis": side("vocalis"), "vllm": side("vllm")}, [1, 16], pairs=2)
    assert calls == [("vocalis", 1), ("vllm", 1), ("vllm", 16), ("vocalis", 16),  # pair 0
                     ("vllm", 1), ("vocalis", 1), ("vocalis", 16), ("vllm", 16)]  # pair 1: the other side first
    assert [r["first"] for r in runs] == ["vocalis", "vllm", "vllm", "vocalis"]
    assert bench.pair_ratios(runs, 1) == [2.0, 1.0] and bench.pair_ratios(runs, 16) == [2.0, 4.0]


def test_the_vocalis_side_decodes_greedily_the_same_ids_every_time(tmp_path):
    bench = load_bench("runtime_vs_vllm")
    torch.manual_seed(0)
    lm = bench.Qwen3LM(CONFIG)
    for parameter in lm.parameters():
        torch.nn.init.normal_(parameter, std=0.5)  # diverse greedy tokens, as the reference's initializer_range 0.5
    save_file({f"model.{k}": v.contiguous() for k, v in lm.state_dict().items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    side = bench.VocalisSide(tmp_path, prompt_len=5, new_tokens=6)
    first, again = side.decode(3), side.decode(3)
    assert first["batch"] == 3 and first["tokens_per_s"] > 0 and len(first["first_ids"]) == 6
    assert first["first_ids"] == again["first_ids"] and len(set(first["first_ids"])) > 1
