"""The int4-decode deploy option's layer: a call of up to FEW_ROWS rows is its int4 weights' product, a larger one
its int8 weights', bit for bit; a shape the int4 kernel does not take runs int8 at every size."""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.int4_decode_linear import FEW_ROWS, Int4DecodeLinear
from vocalis.stages.layers.int4_linear import Int4WeightLinear
from vocalis.stages.layers.int8_linear import Int8DynamicLinear


def test_few_rows_take_the_int4_weights_and_more_rows_the_int8():
    torch.manual_seed(0)
    linear = nn.Linear(64, 48)
    hybrid = Int4DecodeLinear(linear)
    int4, int8 = Int4WeightLinear(linear), Int8DynamicLinear(linear)
    with torch.inference_mode():
        for rows in (1, FEW_ROWS):
            x = torch.randn(rows, 1, 64)
            assert torch.equal(hybrid(x), int4(x)) and not torch.equal(hybrid(x), int8(x))
        x = torch.randn(FEW_ROWS + 1, 64)
        assert torch.equal(hybrid(x), int8(x)) and not torch.equal(hybrid(x), int4(x))
    assert hybrid.parts == (48,) and isinstance(hybrid.few_rows, Int4WeightLinear)


def test_a_shape_the_int4_kernel_does_not_take_runs_int8_at_every_size():
    linear = nn.Linear(48, 40)  # inputs not in 32s, outputs not in 16s
    hybrid = Int4DecodeLinear(linear)
    assert hybrid.few_rows is None
    x = torch.randn(2, 48)
    with torch.inference_mode():
        assert torch.equal(hybrid(x), Int8DynamicLinear(linear)(x))
