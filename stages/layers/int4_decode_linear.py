"""int4 weights for decode steps and int8 for prompts: the kernel behind the `quantize: int4-decode` deploy setting
(which linears it replaces: stages/layers/quantized_linear.py; which stages get it: stages/models/quantizable.py).

Each linear is held twice, as an Int4WeightLinear and as an Int8DynamicLinear, and a call takes the one that is
faster at its row count: int4 up to FEW_ROWS rows, where a step streams its weights and half the bytes is about half
the time, int8 beyond, where the int4 kernel's time grows with the rows and oneDNN's int8 product barely does
(bench/int8_layout.py: int4 0.74-1.09x int8's time at 8 rows on Qwen3-TTS 0.6B's shapes, 0.97-1.39x at 12, 1.1-1.6x at
16). So a decode step gets int4's speed and a prompt int8's, for the memory of both (about 1.6 bytes a weight against
int8-dynamic's 1). A linear of a shape the int4 kernel does not take runs int8 only.

A row's output depends on the path its call took: a decode row batched with a prompt's rows in one step, or in a
batch of more than FEW_ROWS, takes the int8 path.
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.int4_linear import Int4WeightLinear
from vocalis.stages.layers.int8_linear import Int8DynamicLinear

FEW_ROWS = 8
"""The most rows a call runs through the int4 weights."""


class Int4DecodeLinear(nn.Module):
    """Int4WeightLinear for calls of up to FEW_ROWS rows, Int8DynamicLinear for more (both of the same linears)."""

    def __init__(self, *linears: nn.Linear) -> None:
        super().__init__()
        self.many_rows = Int8DynamicLinear(*linears)
        self.few_rows = Int4WeightLinear(*linears) if all(map(Int4WeightLinear.accepts, linears)) else None
        self.in_features, self.out_features = self.many_rows.in_features, self.many_rows.out_features
        self.parts = self.many_rows.parts
        """Each joined linear's output width, in order (split the output by these)."""

    @staticmethod
    def accepts(linear: nn.Linear) -> bool:
        """Every shape (int8 only where the int4 kernel does not take it)."""
        return True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.few_rows is not None and x.numel() <= FEW_ROWS * self.in_features:
            return self.few_rows(x)
        return self.many_rows(x)
