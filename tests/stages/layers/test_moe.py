"""The Qwen3.5-MoE hybrid decoder (Fish Audio Drama 3's backbone type) against transformers' `qwen3_5_moe`.

Goldens: tests/goldens/qwen3_5_moe/make_goldens.py (tiny random weights, 8 experts top-2, run in the reference
venv). Only the backbone: Drama 3's codec and codebook decoder are not served by this floor block.

The bound is float32 rounding along the forward (tests/tolerance.py: ~1e-3 for the dense rows, |hidden| up to 4): the
float32 forward itself is only that good. On an AVX-512 Xeon our float32 rows differ from our own float64 rows by 5e-4
and from the golden by 6.1e-4, and the float64 rows differ from the (float32) golden by 4.5e-4; the machine that made
the goldens happened to agree to 1e-4.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.components.hybrid import HybridConfig, HybridDecoder
from vocalis.stages.layers.moe import SparseMoE, fuse_expert_weights
from vocalis.stages.layers.weights import DerivedWeights, load_strict, take
from vocalis.stages.runtime.block_manager import CacheShape  # noqa: F401  (the cache shape type the decoder reports)
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.linear_attention import RecurrentStates

GOLDENS = Path(__file__).resolve().parents[2] / "goldens" / "qwen3_5_moe"


@pytest.fixture(scope="module")
def golden():
    tensors = load_file(str(GOLDENS / "goldens.safetensors"))
    config = HybridConfig.from_dict(json.loads((GOLDENS / "config.json").read_text()))
    decoder = load_strict(HybridDecoder(config), take(tensors, "model."), "tiny qwen3_5_moe").eval()
    return decoder, tensors


def test_dense_rows_match_transformers(golden):
    decoder, tensors = golden
    with torch.no_grad(), traced() as path:
        hidden = decoder.dense(decoder.embed_tokens(tensors["golden.ids"])[None])[0]
    torch.testing.assert_close(hidden, tensors["golden.dense"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_cached_prefill_then_decodes_match_transformers(golden):
    decoder, tensors = golden
    ids = tensors["golden.ids"]
    cache = PagedKVCache(decoder.cache_shape(256), num_blocks=16, block_size=8)
    cache.states = RecurrentStates(decoder.state_shape(), num_slots=2)
    table = list(range(cache.blocks.blocks_for(len(ids))))
    cache.states.reset(torch.tensor([1]))
    outs, start = [], 0
    with torch.no_grad(), traced() as path:
        for n in [80] + [1] * 10:
            batch = cache.batch([table], [start], [n], state_slots=[1])
            outs.append(decoder.cached(decoder.embed_tokens(ids[start : start + n]), batch, cache))
            start += n
    torch.testing.assert_close(torch.cat(outs), tensors["golden.cached"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_published_per_expert_tensors_fuse_to_the_same_model(golden):
    decoder, tensors = golden
    weights = take(tensors, "model.")
    split = {}
    for name, tensor in weights.items():
        match = re.fullmatch(r"(.*\.experts)\.(gate_up_proj|down_proj)", name)
        if match is None:
            split[name] = tensor
        elif match[2] == "down_proj":
            for e, w in enumerate(tensor):
                split[f"{match[1]}.{e}.down_proj.weight"] = w
        else:
            for e, w in enumerate(tensor):
                gate, up = w.chunk(2)
                split[f"{match[1]}.{e}.gate_proj.weight"], split[f"{match[1]}.{e}.up_proj.weight"] = gate, up
    fused = fuse_expert_weights(split)
    assert set(fused) == set(weights)
    for name in weights:
        assert torch.equal(fused[name], weights[name]), name
    del split["layers.0.mlp.experts.3.up_proj.weight"]
    with pytest.raises(ValueError, match=r"experts\.3 lacks \['up_proj'\]"):
        fuse_expert_weights(split)


def test_fused_experts_are_made_a_layer_at_a_time_when_asked_for():
    """Nothing is read until a fused tensor is asked for, and then only its own layer's parts; experts whose parts
    do not stack raise before anything is read."""
    g = torch.Generator().manual_seed(5)
    shapes = {"gate_proj": (4, 6), "up_proj": (4, 6), "down_proj": (6, 4)}
    split = {f"layers.{layer}.mlp.experts.{e}.{part}.weight": torch.randn(*shape, generator=g)
             for layer in range(2) for e in range(3) for part, shape in shapes.items()} | {"norm.weight": torch.ones(6)}
    read: list[str] = []
    counting = DerivedWeights({k: (tuple(v.shape), lambda k=k: read.append(k) or split[k]) for k, v in split.items()})
    fused = fuse_expert_weights(counting)
    assert read == [] and set(fused) == {"norm.weight"} | {f"layers.{i}.mlp.experts.{p}" for i in range(2) for p in ("gate_up_proj", "down_proj")}
    assert fused.shape("layers.1.mlp.experts.gate_up_proj") == (3, 8, 6) and fused.shape("layers.1.mlp.experts.down_proj") == (3, 6, 4)
    gate_up = fused["layers.1.mlp.experts.gate_up_proj"]
    assert sorted(read) == sorted(f"layers.1.mlp.experts.{e}.{p}.weight" for e in range(3) for p in ("gate_proj", "up_proj"))
    expert = "layers.1.mlp.experts.{}.{}.weight".format
    assert torch.equal(gate_up, torch.stack([torch.cat([split[expert(e, "gate_proj")], split[expert(e, "up_proj")]]) for e in range(3)]))
    split[expert(2, "up_proj")] = torch.randn(4, 5)
    with pytest.raises(ValueError, match=r"experts\.2\.gate_proj\.weight: shapes .* do not stack"):
        fuse_expert_weights(split)


def test_batched_dispatch_equals_each_token_through_its_own_experts():
    torch.manual_seed(4)
    moe = SparseMoE(hidden=16, num_experts=6, top_k=3, intermediate=8, shared_intermediate=12)
    torch.nn.init.normal_(moe.gate.weight, std=1.0)
    x = torch.randn(37, 16)
    with torch.no_grad():
        with traced() as path:
            batched = moe(x)
        tolerance = rounding_bound(torch.float32, path.peak, path.steps)  # every expert's matmuls counted: an overestimate
        for t in range(len(x)):
            probs = torch.softmax(moe.gate(x[t]), -1)
            top, chosen = probs.topk(3)
            top = top / top.sum()
            expected = torch.sigmoid(moe.shared_expert_gate(x[t])) * moe.shared_expert(x[t])
            for w, e in zip(top, chosen, strict=True):
                gate, up = (moe.experts.gate_up_proj[e] @ x[t]).chunk(2)
                expected = expected + w * (moe.experts.down_proj[e] @ (torch.nn.functional.silu(gate) * up))
            torch.testing.assert_close(batched[t], expected, atol=tolerance, rtol=0)
        alone = moe(x[5:6])
    torch.testing.assert_close(alone[0], batched[5], atol=tolerance, rtol=0)  # a token's output does not depend on the batch
