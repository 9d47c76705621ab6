"""Which linears a quantising deploy option replaces, for each kernel: every nn.Linear under the modules given that
the kernel takes (the kept ones left, a shared one replaced once), and the linears a layer reads from one input joined
into one product whose output is that of the separate quantised linears, bit for bit."""

from __future__ import annotations

import copy
import weakref

import pytest
import torch
from torch import nn

from vocalis.stages.layers.attention import QKVAttention, causal_mask
from vocalis.stages.layers.int4_decode_linear import Int4DecodeLinear
from vocalis.stages.layers.int4_linear import Int4WeightLinear
from vocalis.stages.layers.int8_linear import Int8DynamicLinear
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.quantized_linear import replace_linears
from vocalis.stages.layers.rotary import rope
from vocalis.stages.runtime.kv_cache import CacheShape, PagedKVCache

KINDS = [Int8DynamicLinear, Int4WeightLinear, Int4DecodeLinear]


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    shared = nn.Linear(64, 64)
    return nn.Sequential(nn.Embedding(10, 32), nn.Linear(32, 96, bias=False), nn.GELU(), nn.Linear(96, 64),
                         nn.LayerNorm(64), shared, nn.Sequential(shared, nn.Linear(64, 32)))


@pytest.mark.parametrize("kind", KINDS)
def test_every_linear_is_replaced_once_and_kept_ones_stay_float(kind):
    model = tiny_model()
    assert replace_linears(model, kind=kind) == 4  # the shared linear once
    assert not any(type(m) is nn.Linear for m in model.modules())
    assert model[5] is model[6][0] and isinstance(model[5], kind)
    model = tiny_model()
    head = model[6][1]
    assert replace_linears(model, kind=kind, keep=(head,)) == 3
    assert model[6][1] is head and type(head) is nn.Linear
    assert [type(m) for m in (model[1], model[3], model[5])] == [kind] * 3
    assert replace_linears(nn.Conv1d(2, 2, 3), kind=kind) == 0


def test_a_linear_the_kernel_does_not_take_stays_float():
    model = nn.Sequential(nn.Linear(64, 48), nn.Linear(48, 64), nn.Linear(64, 40))  # inputs of 48, outputs of 40
    assert replace_linears(model, kind=Int4WeightLinear) == 1
    assert [type(m) for m in model] == [Int4WeightLinear, nn.Linear, nn.Linear]
    assert replace_linears(model, kind=Int8DynamicLinear) == 2  # int8 takes every shape (and int4-decode, as int8)
    with pytest.raises(ValueError, match="multiples of 32"):
        Int4WeightLinear(nn.Linear(48, 64))


def separately_quantized(module: nn.Module, kind: type) -> nn.Module:
    """Every linear of `module` its own `kind` (no joined products)."""
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, kind(child))
    return module


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", [{}, {"bias": True, "o_bias": False}, {"output_gate": True, "qk_norm_eps": 1e-6},
                                     {"qk_norm_eps": 1e-6}, {"qk_norm_eps": 1e-6, "rope_upcast": True}])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_attentions_q_k_v_join_into_one_product_with_the_same_output(kind, options, dtype):
    """With q/k-norms (and no output gate) the joined product's query and key heads are also normed and rotated as
    one tensor (`_joined_qk`): the same output bit for bit."""
    torch.manual_seed(2)
    attention = QKVAttention(64, heads=4, kv_heads=2, head_dim=16, **options).to(dtype)
    if attention.q_norm is not None:
        with torch.no_grad():  # norms whose weights differ, so that a head scaled by the other's weight shows
            attention.q_norm.weight.normal_()
            attention.k_norm.weight.normal_()
    x = torch.randn(2, 5, 64, dtype=dtype)
    rope = tuple(t.to(dtype) for t in (torch.randn(5, 16), torch.randn(5, 16)))
    separate = separately_quantized(copy.deepcopy(attention), kind)
    assert replace_linears(attention, kind=kind) == 4
    assert isinstance(attention.qkv_proj, kind) and not hasattr(attention, "q_proj")
    assert attention.qkv_proj.out_features == sum(getattr(separate, n).out_features for n in ("q_proj", "k_proj", "v_proj"))
    with torch.inference_mode():
        joined, alone = attention.dense(x, rope, causal_mask(5)), separate.dense(x, rope, causal_mask(5))
    assert torch.equal(joined, alone)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_joined_q_k_norms_attend_over_the_paged_cache_as_the_separate_ones(dtype):
    """The cached backend takes q and k as views of the one normed and rotated tensor: a prefill then a decode step
    give the separate linears' output bit for bit."""
    torch.manual_seed(3)
    attention = QKVAttention(64, heads=4, kv_heads=2, head_dim=16, qk_norm_eps=1e-6).to(dtype)
    with torch.no_grad():
        attention.q_norm.weight.normal_()
        attention.k_norm.weight.normal_()
    separate = separately_quantized(copy.deepcopy(attention), Int8DynamicLinear)
    replace_linears(attention, kind=Int8DynamicLinear)
    outputs = []
    for module in (attention, separate):
        cache = PagedKVCache(CacheShape(num_layers=1, num_kv_heads=2, head_dim=16, max_len=16), num_blocks=4, block_size=4, dtype=dtype)
        torch.manual_seed(4)
        got = []
        with torch.inference_mode():
            for start, length in ((0, 5), (5, 1)):
                batch = cache.batch([[2, 0]], [start], [length])
                rotary = tuple(t.to(dtype) for t in rope(batch.token_positions, 16, 10000.0))
                got.append(module.cached(torch.randn(length, 64, dtype=dtype), rotary, cache, 0, batch))
        outputs.append(torch.cat(got))
    assert torch.equal(*outputs)


@pytest.mark.parametrize("kind", KINDS)
def test_a_gated_mlps_gate_and_up_join_into_one_product_with_the_same_output(kind):
    torch.manual_seed(3)
    mlp = GatedMLP(32, 96, bias=True)
    x = torch.randn(3, 32)
    separate = separately_quantized(copy.deepcopy(mlp), kind)
    assert replace_linears(mlp, kind=kind) == 3
    assert isinstance(mlp.gate_up_proj, kind) and not hasattr(mlp, "gate_proj")
    with torch.inference_mode():
        assert torch.equal(mlp(x), separate(x))


@pytest.mark.parametrize("kind", KINDS)
def test_a_kept_or_shared_linear_is_not_joined(kind):
    mlp = GatedMLP(32, 64)
    gate = mlp.gate_proj
    assert replace_linears(mlp, kind=kind, keep=(gate,)) == 2
    assert mlp.gate_up_proj is None and mlp.gate_proj is gate and isinstance(mlp.up_proj, kind)
    shared = GatedMLP(32, 64)
    model = nn.ModuleList([shared, nn.Sequential(shared.up_proj)])
    assert replace_linears(model, kind=kind) == 3
    assert shared.gate_up_proj is None and model[1][0] is shared.up_proj and isinstance(shared.up_proj, kind)
    with pytest.raises(ValueError, match="all have a bias or none"):
        kind(nn.Linear(32, 32), nn.Linear(32, 32, bias=False))


def test_each_float_linear_is_freed_as_soon_as_it_is_replaced():
    """So the float model and its quantised copy are never in memory whole at once (the load's peak)."""
    model = nn.Sequential(nn.Linear(32, 32), nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32)))
    linears = [weakref.ref(m) for m in model.modules() if type(m) is nn.Linear]
    alive_at_each_build = []

    class Recording(Int8DynamicLinear):
        def __init__(self, *members: nn.Linear) -> None:
            alive_at_each_build.append(sum(ref() is not None for ref in linears))
            super().__init__(*members)

    assert replace_linears(model, kind=Recording) == 3
    assert alive_at_each_build == [3, 2, 1]  # the one being replaced, and those not reached yet
