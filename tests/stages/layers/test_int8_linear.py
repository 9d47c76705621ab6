"""The int8-dynamic deploy option's layer: its output within the error that int8 rounding of weights and inputs allows
(which linears it replaces and joins: test_quantized_linear.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vocalis.stages.layers.int8_linear import INT8_MAX, Int8DynamicLinear
from vocalis.stages.layers.quantized_linear import replace_linears


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
    assert replace_linears(model, kind=Int8DynamicLinear) == 4  # the shared linear once
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
