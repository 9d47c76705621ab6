"""bench/drama3_build.py at shrunk widths: what it writes is Drama 3's published layout (FP8 experts one by one, a shard
per layer), the server loads and serves it with the experts still FP8, and the requested depth is the one built."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import torch
from safetensors import safe_open

from tests import tiny_checkpoints
from tests.bench.bench_script import load_bench

FRAMES = 3


def shrunk_sizes(build) -> dict:
    """The assumed sizes' structure (flags, layer pattern, 13-layer tower) at tiny widths; 160 intermediate rows are
    not a whole number of 128-row blocks, so the gate and up halves have blocks of their own; the semantic band and
    codebooks are the tiny codec's."""
    sizes = json.loads(build.SIZES.read_text())
    text = sizes["text_config"] | {"vocab_size": 400, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                                   "head_dim": 32, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
                                   "linear_num_key_heads": 2, "linear_num_value_heads": 4, "moe_intermediate_size": 160,
                                   "shared_expert_intermediate_size": 96, "num_experts": 8, "num_experts_per_tok": 2}
    decoder = sizes["audio_decoder_config"] | {"dim": 64, "text_dim": 64, "n_head": 4, "n_local_heads": 2, "head_dim": 16,
                                               "intermediate_size": 96, "vocab_size": 64}
    return sizes | {"text_config": text, "audio_decoder_config": decoder, "semantic_start_token_id": 320,
                    "semantic_end_token_id": 383}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    build, gpu = load_bench("drama3_build"), load_bench("gpu")
    root = tmp_path_factory.mktemp("drama3")
    out = root / "drama-3-4-layers"
    shutil.copytree(tiny_checkpoints.drama3(root), out, ignore=shutil.ignore_patterns("*.safetensors"))
    build.build(out, json.loads((out / "config.json").read_text()), 4, gpu.save_file, sizes=shrunk_sizes(build))
    return build, gpu, out


def test_the_layout_is_the_published_one_a_shard_per_layer(built):
    _, _, out = built
    config = json.loads((out / "config.json").read_text())
    assert config["text_config"]["num_hidden_layers"] == 4 and config["text_config"]["mlp_layer_types"] == ["moe"] * 4
    assert sorted(p.name for p in out.glob("*.safetensors")) == [
        "model-base.safetensors", *(f"model-layer-{i:02d}.safetensors" for i in range(4)), "model-tower.safetensors"]
    with safe_open(str(out / "model-layer-03.safetensors"), "pt") as f:
        names = set(f.keys())
        gate = f.get_tensor("model.language_model.layers.3.mlp.experts.7.gate_proj.weight")
        scale = f.get_tensor("model.language_model.layers.3.mlp.experts.7.gate_proj.weight_scale_inv")
        down = f.get_tensor("model.language_model.layers.3.mlp.experts.0.down_proj.weight")
    assert gate.dtype == torch.float8_e4m3fn and tuple(gate.shape) == (160, 64) and tuple(scale.shape) == (2, 1)
    assert down.dtype == torch.float8_e4m3fn and tuple(down.shape) == (64, 160)
    assert all(n.startswith("model.language_model.layers.3.") for n in names)
    assert "model.language_model.layers.3.self_attn.q_proj.weight" in names  # every fourth layer attends in full
    with safe_open(str(out / "model-base.safetensors"), "pt") as f:
        head = f.get_tensor("lm_head.weight")
    assert head.dtype == torch.bfloat16 and not head[config["eos_token_id"]].any() and head[321].any()


def test_the_server_loads_it_with_fp8_experts_and_serves_a_request(built):
    _, gpu, out = built
    model = gpu.load_model(str(out), stage_overrides=json.dumps({"0": {"device": "cpu", "dtype": "bfloat16"}}))
    try:
        experts = [b for name, b in model.pipeline.stages[1].model.model.named_buffers() if name.endswith("experts.gate_up_proj")]
        assert len(experts) == 4 and all(b.dtype == torch.float8_e4m3fn for b in experts)
        _, _, seconds = asyncio.run(gpu.one(model, gpu.CASES["drama-3"], FRAMES))
    finally:
        model.close()
    assert seconds == pytest.approx(FRAMES * 2048 / 44100)  # the tiny codec: 2048 samples a frame at 44.1 kHz


def test_a_depth_that_breaks_the_layer_pattern_is_refused(built):
    build, _, _ = built
    with pytest.raises(ValueError, match="multiple of 4"):
        build.config_json({}, 6)
