"""int8 weights for linear layers: the kernel behind the `quantize: int8-dynamic` deploy setting (which linears it
replaces: stages/layers/quantized_linear.py; which stages get it: stages/models/quantizable.py).

Each nn.Linear becomes an Int8DynamicLinear: its weight rounded to int8 with one symmetric scale per output channel
(a quarter of float32's bytes), and at each call its input rounded to int8 with one scale per row, multiplied by
`torch._int_mm` (int8 x int8 -> int32; oneDNN's VNNI kernel on x86 CPUs), then rescaled to the input's dtype.

Why `torch._int_mm` and not `torch.ao.quantization.quantize_dynamic` (FBGEMM's dynamic quantised linear): on this
CPU (avx512_vnni, torch 2.13, one thread) both run a 1024 x 3072 linear at one row in ~0.15 ms against float32's
0.25-1.4 ms and bfloat16's 0.5-0.9 ms, and 4-5x faster than float32 at 4-64 rows; but torch.ao.quantization is
deprecated with its removal announced (it warns at every use) and its modules hold quantised tensors whose creation is
deprecated too, while `_int_mm` is the plain aten op that torchao's int8 dynamic quantisation lowers to on CPU and
CUDA. Weight-only int8 (`aten._weight_int8pack_mm`) was 2-10x slower than float32 with float32 inputs here, so it is
not offered. torchao itself is not a dependency of this project.

The weight is held as nn.Linear holds it, [out, in], and handed to `_int_mm` transposed: oneDNN's one-row product
reads that layout 1.4-2.1x faster than a contiguous [in, out] (bench/int8_layout.py), and no slower at the batch
sizes a decode step runs but in one shape (see BENCHMARKS.md).
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.quantized_linear import join_linears

INT8_MAX = 127


class Int8DynamicLinear(nn.Module):
    """y = x W^T + b with W held as int8 (per output channel) and x rounded to int8 per row at each call.

    Given several linears of one input (a layer's q, k and v), it is their concatenation: one rounding of the input
    and one product for all of them. Each output channel keeps its own scale and the products are exact integers,
    so each part of the output is what that linear alone would give, bit for bit."""

    def __init__(self, *linears: nn.Linear) -> None:
        super().__init__()
        joined = join_linears("Int8DynamicLinear", linears)
        weight = joined.weight
        self.out_features, self.in_features = weight.shape
        self.parts = joined.parts
        scale = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / INT8_MAX
        self.register_buffer("weight_int8", torch.round(weight / scale[:, None]).to(torch.int8))  # [out, in]
        self.register_buffer("weight_scale", scale)
        self.register_buffer("bias", joined.bias)

    @staticmethod
    def accepts(linear: nn.Linear) -> bool:
        """Every shape."""
        return True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Few ops and in place where it can: at one row each op's dispatch costs about what the product does.
        rows = x.reshape(-1, self.in_features)
        if rows.dtype != torch.float32:
            rows = rows.float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=torch.finfo(torch.float32).tiny).div_(INT8_MAX)
        quantized = rows.div(scale).round_().to(torch.int8)
        out = torch._int_mm(quantized, self.weight_int8.t()).mul(scale).mul_(self.weight_scale)
        if self.bias is not None:
            out = out.add_(self.bias)
        return out.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
