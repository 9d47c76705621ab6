"""PackedLinear (the `packed_linears` deploy setting's kernel): nn.Linear's result within its dtype's rounding of the
sum, for one linear and for several of one input joined into one product, at the rows of a decode step and of a
prompt, in float32 and (where oneDNN runs it natively) bfloat16; and the linears it refuses."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch import nn

from tests.tolerance import rounding_bound
from vocalis.stages.layers.attention import QKVAttention
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.packed_linear import PackedLinear, available
from vocalis.stages.layers.quantized_linear import replace_linears

DTYPES = [torch.float32] + ([torch.bfloat16] if available(torch.bfloat16) else [])


def bound(x: torch.Tensor, linear: nn.Linear, dtype: torch.dtype) -> float:
    """Two evaluations of one linear in `dtype`: each output a sum of in_features products plus the bias, its
    partial sums bounded by |x|.|W| + |b| (float64), and in a half precision the output's own rounding."""
    x64, w64 = x.double().abs(), linear.weight.detach().double().abs()
    magnitude = float((x64 @ w64.T).max()) + (0.0 if linear.bias is None else float(linear.bias.detach().double().abs().max()))
    return rounding_bound(dtype, magnitude, linear.in_features + 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 4, 181])
def test_a_packed_linear_gives_the_linear_s_result_within_its_rounding(dtype, rows):
    torch.manual_seed(rows)
    linear = nn.Linear(256, 96).to(dtype)
    x = torch.randn(rows, 256).to(dtype)
    packed = PackedLinear(linear)
    with torch.inference_mode():
        got, want = packed(x), linear(x)
    assert got.dtype == dtype and got.shape == want.shape
    torch.testing.assert_close(got.double(), want.double(), rtol=0, atol=bound(x, linear, dtype))
    assert not packed.weight_packed.is_mkldnn or packed.weight_packed.dtype == dtype


def test_several_linears_of_one_input_are_one_product_split_by_parts():
    torch.manual_seed(1)
    q, k, v = nn.Linear(64, 64, bias=False), nn.Linear(64, 32, bias=False), nn.Linear(64, 32, bias=False)
    packed = PackedLinear(q, k, v)
    assert packed.parts == (64, 32, 32) and packed.out_features == 128
    x = torch.randn(2, 3, 64)  # a leading batch axis: the rows are flattened and the shape restored
    with torch.inference_mode():
        parts = packed(x).split(packed.parts, dim=-1)
        for part, linear in zip(parts, (q, k, v), strict=True):
            torch.testing.assert_close(part, linear(x), rtol=0, atol=bound(x.reshape(-1, 64), linear, torch.float32))


def test_an_input_in_another_dtype_is_computed_in_the_weight_s_and_returned_in_its_own():
    linear = nn.Linear(32, 16)
    x = torch.randn(3, 32, dtype=torch.float64)
    with torch.inference_mode():
        out = PackedLinear(linear)(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, linear(x.float()).double(), rtol=0, atol=bound(x.float(), linear, torch.float32))


def test_linears_it_cannot_run_are_refused_and_left_in_place():
    assert not PackedLinear.accepts(nn.Linear(8, 8).half())
    assert not PackedLinear.accepts(nn.Linear(8, 8, device="meta"))
    with pytest.raises(ValueError, match="PackedLinear takes CPU linears of one dtype"):
        PackedLinear(nn.Linear(8, 8).half())
    model = nn.Sequential(nn.Linear(8, 8).half(), nn.Linear(8, 8))
    assert replace_linears(model, kind=PackedLinear) == 1
    assert [type(m) for m in model] == [nn.Linear, PackedLinear]


def test_a_layer_s_projections_of_one_input_are_packed_as_one():
    attention = QKVAttention(64, 4, 2, 16)
    mlp = GatedMLP(64, 128)
    model = nn.ModuleList([attention, mlp])
    assert replace_linears(model, kind=PackedLinear) == 7  # q, k, v joined, o; gate and up joined, down
    for layer in (attention, mlp):
        joined = [getattr(layer, name) for name in layer.fused_inputs]
        assert all(isinstance(m, PackedLinear) and len(m.parts) > 1 for m in joined)
    assert not any(type(m) is nn.Linear for m in model.modules())


def test_after_each_replacement_the_linears_it_replaced_are_already_freed():
    """What lets a load give each replaced weight's memory back before it packs the next (quantize_stages)."""
    attention = QKVAttention(64, 4, 2, 16)
    model = nn.Sequential(attention, nn.Linear(64, 64))
    originals = [weakref.ref(m) for m in (attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj, model[1])]
    seen = []
    assert replace_linears(model, kind=PackedLinear, after_each=lambda: seen.append([r() is None for r in originals])) == 5
    assert seen == [[True, True, True, False, False], [True, True, True, False, True], [True] * 5]  # joined, then by parent
