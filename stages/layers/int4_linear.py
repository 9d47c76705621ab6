"""int4 weights for linear layers: the kernel behind the `quantize: int4-weight` deploy setting (which linears it
replaces: stages/layers/quantized_linear.py; which stages get it: stages/models/quantizable.py).

Each nn.Linear whose shape the kernel takes becomes an Int4WeightLinear: its weight rounded to 16 levels per group of
GROUP_SIZE inputs (asymmetric: a scale and a zero point per group and output channel, both bfloat16), packed two to
a byte, and at each call multiplied by the input in bfloat16 with `aten._weight_int4pack_mm_for_cpu`, torch's own
int4 weight-only kernel on CPU (the one torchao's int4 weight-only quantisation lowers to there). A sixth of
float32's bytes (an eighth, plus a scale and a zero point for each 32 weights).

Why: a decode step at a few rows reads each weight once and does little else with it, so it runs at the speed the
weights stream from memory; half of int8's bytes is about half of its time. Measured on this CPU (two cores, weights
cold, bench/int8_layout.py): 0.53-0.67x Int8DynamicLinear's time at one row and 0.44-0.64x at four, on every linear
shape of Qwen3-TTS 0.6B. Its price is many rows: the kernel's time grows with the rows where oneDNN's int8 product
barely does (1.1-1.6x Int8DynamicLinear's at 16 rows, 2.3-3.1x at 64), so a long prompt's prefill is slower than
under int8-dynamic. The input and output are rounded to bfloat16 (the kernel's float32 path is 10-20x slower here).

The kernel wants whole groups and output channels in 16s; a linear of another shape stays in float.
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.quantized_linear import join_linears

GROUP_SIZE = 32
"""Inputs sharing one scale and zero point. 32 ran as fast as 64 or 128 here and rounds each weight more finely."""
LEVELS = 16
OUT_MULTIPLE = 16
"""The packed layout holds output channels in blocks of 16."""


class Int4WeightLinear(nn.Module):
    """y = x W^T + b with W held as int4 in groups, x and the product in bfloat16, y returned in x's dtype.

    Given several linears of one input (a layer's q, k and v), it is their concatenation: one product for all of
    them. Each output channel has its own groups, so each part is what that linear alone would compute."""

    def __init__(self, *linears: nn.Linear) -> None:
        super().__init__()
        joined = join_linears("Int4WeightLinear", linears)
        if not all(self.accepts(linear) for linear in linears):
            raise ValueError(f"Int4WeightLinear needs input widths in multiples of {GROUP_SIZE} and output widths in "
                             f"multiples of {OUT_MULTIPLE}; got {[tuple(linear.weight.shape) for linear in linears]}")
        weight = joined.weight
        self.out_features, self.in_features = weight.shape
        self.parts = joined.parts
        groups = weight.view(self.out_features, -1, GROUP_SIZE)
        low, high = groups.amin(-1, keepdim=True), groups.amax(-1, keepdim=True)
        scale = ((high - low) / (LEVELS - 1)).clamp(min=torch.finfo(torch.bfloat16).tiny).bfloat16()
        # The kernel computes (q - 8) * scale + zero: the levels are chosen against the scale and zero it will read.
        zero = (low + LEVELS // 2 * scale.float()).bfloat16()
        levels = ((groups - zero.float()) / scale.float()).round().add(LEVELS // 2).clamp(0, LEVELS - 1)
        levels = levels.to(torch.int32).view(self.out_features, self.in_features)
        self.register_buffer("weight_int4", torch.ops.aten._convert_weight_to_int4pack_for_cpu(levels, 1))
        # [in / GROUP_SIZE, out, 2]: each group's (scale, zero), the kernel's layout.
        self.register_buffer("scales_and_zeros", torch.cat([scale, zero], dim=-1).transpose(0, 1).contiguous())
        self.register_buffer("bias", joined.bias)

    @staticmethod
    def accepts(linear: nn.Linear) -> bool:
        """Whole groups of inputs and output channels in 16s."""
        return linear.in_features % GROUP_SIZE == 0 and linear.out_features % OUT_MULTIPLE == 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.dtype != torch.bfloat16:
            rows = rows.to(torch.bfloat16)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.weight_int4, GROUP_SIZE, self.scales_and_zeros)
        out = out.to(x.dtype)
        if self.bias is not None:
            out = out.add_(self.bias)
        return out.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, " \
               f"group_size={GROUP_SIZE}"
