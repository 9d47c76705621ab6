"""The int8-dynamic deploy option's layer: every nn.Linear under the modules given replaced (the kept ones left), its
output within the error that int8 rounding of weights and inputs allows."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from vocalis.stages.layers.attention import QKVAttention, causal_mask
from vocalis.stages.layers.int8_linear import INT8_MAX, Int8DynamicLinear, quantize_linears
from vocalis.stages.layers.mlp import GatedMLP


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    shared = nn.Linear(24, 24)
    return nn.Sequential(nn.Embedding(10, 48), nn.Linear(48, 96, bias=False), nn.GELU(), nn.Linear(96, 24),
                         nn.LayerNorm(24), shared, nn.Sequential(shared, nn.Linear(24, 7)))


def rounding_bound(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """|x W^T - q(x) q(W)^T| per output, from rounding each to the nearest of 127 levels per side: an input within
    half its row's step, a weight within half its channel's step, their product error summed over the inputs."""
    x_step = x.abs().amax(-1, keepdim=True) / INT8_MAX
    w_step = weight.abs().amax(1) / INT8_MAX
    return (x.abs().sum(-1, keepdim=True) * w_step / 2 + x_step / 2 * weight.abs().sum(1)
            + x.shape[-1] * x_step * w_step / 4)


def test_every_linear_becomes_int8_and_the_output_stays_close():
    model = tiny_model()
    ids = torch.randint(0, 10, (3, 5))
    with torch.inference_mode():
        expected = model(ids)
    assert quantize_linears(model) == 4  # the shared linear once
    assert not any(type(m) is nn.Linear for m in model.modules())
    assert model[5] is model[6][0]
    assert all(m.weight_int8.dtype == torch.int8 for m in model.modules() if isinstance(m, Int8DynamicLinear))
    with torch.inference_mode():
        got = model(ids)
    assert got.shape == expected.shape
    # A stack's error compounds; one layer's is bounded exactly below. Here: within 2 % of the output's range.
    assert (got - expected).abs().max() <= 0.02 * expected.abs().max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_layer_is_within_the_rounding_bound(dtype):
    torch.manual_seed(1)
    linear = nn.Linear(64, 40)
    x = (torch.randn(2, 3, 64) * torch.linspace(0.1, 4, 64)).to(dtype)
    quantized = Int8DynamicLinear(linear)
    with torch.inference_mode():
        expected = linear(x.float())
        got = quantized(x)
    assert got.dtype == dtype and got.shape == expected.shape
    bound = rounding_bound(x.float(), linear.weight)
    # The output's own rounding to `dtype` (bfloat16: 8 significant bits), and float32 summation order.
    rounding_to_dtype = expected.abs() * (2 ** -8 if dtype == torch.bfloat16 else 2 ** -20) + 1e-6
    assert ((got.float() - expected).abs() <= bound + rounding_to_dtype).all()
    assert (got.float() - expected).abs().max() > 0  # it did round
    # The weights hold a quarter of float32's bytes (plus one float32 scale per output).
    assert quantized.weight_int8.numel() * 1 + quantized.weight_scale.numel() * 4 < linear.weight.numel() * 4 / 3


def test_kept_linears_stay_float_and_a_module_without_linears_quantises_none():
    model = tiny_model()
    head = model[6][1]
    assert quantize_linears(model, keep=(head,)) == 3
    assert model[6][1] is head and type(head) is nn.Linear
    assert [type(m) for m in (model[1], model[3], model[5])] == [Int8DynamicLinear] * 3 and model[5] is model[6][0]
    assert quantize_linears(nn.Conv1d(2, 2, 3)) == 0


def separately_quantized(module: nn.Module) -> nn.Module:
    """Every linear of `module` its own Int8DynamicLinear (no joined products)."""
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, Int8DynamicLinear(child))
    return module


@pytest.mark.parametrize("options", [{}, {"bias": True, "o_bias": False}, {"output_gate": True, "qk_norm_eps": 1e-6}])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_attentions_q_k_v_join_into_one_product_with_the_same_output(options, dtype):
    torch.manual_seed(2)
    attention = QKVAttention(64, heads=4, kv_heads=2, head_dim=16, **options).to(dtype)
    x = torch.randn(2, 5, 64, dtype=dtype)
    rope = tuple(t.to(dtype) for t in (torch.randn(5, 16), torch.randn(5, 16)))
    separate = separately_quantized(copy.deepcopy(attention))
    assert quantize_linears(attention) == 4
    assert isinstance(attention.qkv_proj, Int8DynamicLinear) and not hasattr(attention, "q_proj")
    assert attention.qkv_proj.out_features == sum(getattr(separate, n).out_features for n in ("q_proj", "k_proj", "v_proj"))
    with torch.inference_mode():
        joined, alone = attention.dense(x, rope, causal_mask(5)), separate.dense(x, rope, causal_mask(5))
    assert torch.equal(joined, alone)


def test_a_gated_mlps_gate_and_up_join_into_one_product_with_the_same_output():
    torch.manual_seed(3)
    mlp = GatedMLP(32, 80, bias=True)
    x = torch.randn(3, 32)
    separate = separately_quantized(copy.deepcopy(mlp))
    assert quantize_linears(mlp) == 3
    assert isinstance(mlp.gate_up_proj, Int8DynamicLinear) and not hasattr(mlp, "gate_proj")
    with torch.inference_mode():
        assert torch.equal(mlp(x), separate(x))


def test_a_kept_or_shared_linear_is_not_joined():
    mlp = GatedMLP(16, 24)
    gate = mlp.gate_proj
    assert quantize_linears(mlp, keep=(gate,)) == 2
    assert mlp.gate_up_proj is None and mlp.gate_proj is gate and isinstance(mlp.up_proj, Int8DynamicLinear)
    shared = GatedMLP(16, 24)
    model = nn.ModuleList([shared, nn.Sequential(shared.up_proj)])
    assert quantize_linears(model) == 3
    assert shared.gate_up_proj is None and model[1][0] is shared.up_proj and isinstance(shared.up_proj, Int8DynamicLinear)
    with pytest.raises(ValueError, match="all have a bias or none"):
        Int8DynamicLinear(nn.Linear(4, 4), nn.Linear(4, 4, bias=False))
