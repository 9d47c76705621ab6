"""The int4-weight deploy option's layer: each weight within half a step of its group's 16 levels, and the output
that of the bfloat16 input times those weights, within bfloat16's rounding (which linears it replaces and joins:
test_quantized_linear.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vocalis.stages.layers.int4_linear import GROUP_SIZE, LEVELS, Int4WeightLinear

BF16_EPS = torch.finfo(torch.bfloat16).eps / 2
"""bfloat16's unit roundoff (2^-8: 8 significant bits): the largest relative error of one rounding to it."""


def dequantized_weight(quantized: Int4WeightLinear) -> torch.Tensor:
    """[out, in] float32: the weight the kernel multiplies by, read through the kernel itself (the identity times it:
    one nonzero term a sum, so exact whatever the order), rounded to bfloat16 on the way out."""
    identity = torch.eye(quantized.in_features, dtype=torch.bfloat16)
    return torch.ops.aten._weight_int4pack_mm_for_cpu(identity, quantized.weight_int4, GROUP_SIZE,
                                                       quantized.scales_and_zeros).float().t()


def test_each_weight_is_within_half_a_step_of_its_groups_levels():
    torch.manual_seed(0)
    linear = nn.Linear(128, 48)
    with torch.no_grad():
        linear.weight.mul_(torch.linspace(0.1, 10, 128))  # groups of very different ranges
    weight = dequantized_weight(Int4WeightLinear(linear))
    groups = linear.weight.detach().view(48, -1, GROUP_SIZE)
    step = (groups.amax(-1, keepdim=True) - groups.amin(-1, keepdim=True)) / (LEVELS - 1)
    error = (weight.view_as(groups) - groups).abs()
    # Half a step, and the scale and zero point held in bfloat16 (each level off by up to 8 steps' rounding, the
    # zero by its own) and the dequantised weight read back in bfloat16. Every op here is an elementwise IEEE one or
    # the one-term product above, so the values compared are the same on any CPU.
    bound = step / 2 + (LEVELS // 2 * step + groups.abs().amax(-1, keepdim=True) * 2) * BF16_EPS
    assert (error <= bound).all()
    assert len(weight.view_as(groups).unique(dim=None)) > LEVELS  # each group has its own levels


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_the_output_is_the_bfloat16_input_times_the_int4_weights(dtype, bias):
    torch.manual_seed(1)
    linear = nn.Linear(96, 64, bias=bias)
    x = (torch.randn(2, 3, 96) * torch.linspace(0.1, 4, 96)).to(dtype)
    quantized = Int4WeightLinear(linear)
    weight = dequantized_weight(quantized)
    with torch.inference_mode():
        got = quantized(x)
    rows = x.to(torch.bfloat16).float()
    expected = rows @ weight.t() + (linear.bias.detach() if bias else 0)
    assert got.dtype == dtype and got.shape == (2, 3, 64)
    # The product rounded to bfloat16, and the reference's weights read back in bfloat16; summation order in float32.
    bound = (rows.abs() @ weight.abs().t()) * BF16_EPS + expected.abs() * BF16_EPS + 1e-6
    assert ((got.float() - expected).abs() <= bound).all()
    with torch.inference_mode():
        exact = x.float() @ linear.weight.detach().t()
    assert (got.float() - exact - (linear.bias.detach() if bias else 0)).abs().max() > 0  # it did round


def test_the_weights_hold_an_eighth_of_float32s_bytes_plus_the_groups():
    linear = nn.Linear(256, 128)
    quantized = Int4WeightLinear(linear)
    assert quantized.weight_int4.numel() * quantized.weight_int4.element_size() == 128 * 256 // 2
    assert quantized.scales_and_zeros.shape == (256 // GROUP_SIZE, 128, 2)
    assert quantized.scales_and_zeros.dtype == torch.bfloat16
