"""int8 weights for linear layers: the kernel behind the `quantize: int8-dynamic` deploy setting (which stages get
it, and the refusal of a stage that cannot, are decided in stages/models/quantizable.py; this module knows no stage).

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

from collections import Counter
from typing import ClassVar, Protocol, runtime_checkable

import torch
from torch import nn

INT8_MAX = 127


@runtime_checkable
class JoinsInputs(Protocol):
    """A layer that reads several linears of one input and runs them as one when the attribute is set:
    {attribute: (names of the linears, in output order)} (QKVAttention, GatedMLP)."""

    fused_inputs: ClassVar[dict[str, tuple[str, ...]]]


class Int8DynamicLinear(nn.Module):
    """y = x W^T + b with W held as int8 (per output channel) and x rounded to int8 per row at each call.

    Given several linears of one input (a layer's q, k and v), it is their concatenation: one rounding of the input
    and one product for all of them. Each output channel keeps its own scale and the products are exact integers,
    so each part of the output is what that linear alone would give, bit for bit."""

    def __init__(self, *linears: nn.Linear) -> None:
        super().__init__()
        if not linears or len({linear.in_features for linear in linears}) != 1:
            raise ValueError("Int8DynamicLinear takes one linear, or several of the same input width")
        if len({linear.bias is None for linear in linears}) != 1:
            raise ValueError("Int8DynamicLinear: the linears it joins must all have a bias or none")
        weight = torch.cat([linear.weight.detach().float() for linear in linears])
        self.in_features, self.out_features = linears[0].in_features, weight.shape[0]
        self.parts = tuple(linear.out_features for linear in linears)
        """Each joined linear's output width, in order (split the output by these)."""
        scale = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / INT8_MAX
        self.register_buffer("weight_int8", torch.round(weight / scale[:, None]).to(torch.int8))  # [out, in]
        self.register_buffer("weight_scale", scale)
        bias = None if linears[0].bias is None else torch.cat([linear.bias.detach() for linear in linears])
        self.register_buffer("bias", bias)

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


def quantize_linears(*modules: nn.Module, keep: tuple[nn.Module, ...] = ()) -> int:
    """Replace every nn.Linear under `modules` (in place) by an Int8DynamicLinear, a linear shared by two parents by
    one; the number of linears replaced (0: none found). The float weights are freed unless something else (a tied
    embedding) still holds them. `keep`: linears left in float, those whose weight the caller reads directly (a head
    indexed by rows, a dtype or device read from it).

    In a layer that `JoinsInputs`, the linears it names become one Int8DynamicLinear under its attribute and leave the
    layer, where each is plain, in no other parent and not kept."""
    parents = list({id(m): m for module in modules for m in module.modules()}.values())
    references = Counter(id(child) for parent in parents for child in parent.children())
    kept = {id(module) for module in keep}
    replaced = 0
    for parent in parents:
        for fused, names in (parent.fused_inputs if isinstance(parent, JoinsInputs) else {}).items():
            members = [getattr(parent, name) for name in names]
            if all(type(m) is nn.Linear and id(m) not in kept and references[id(m)] == 1 for m in members) and \
                    len({m.bias is None for m in members}) == 1:
                setattr(parent, fused, Int8DynamicLinear(*members))
                for name in names:
                    delattr(parent, name)
                replaced += len(members)
    replacements: dict[int, Int8DynamicLinear] = {}
    for parent in parents:
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and id(child) not in kept:
                if id(child) not in replacements:
                    replacements[id(child)] = Int8DynamicLinear(child)
                setattr(parent, name, replacements[id(child)])
    return replaced + len(replacements)
