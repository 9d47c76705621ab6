"""The gated MLP of Llama-style decoders: down(act(gate(x)) * up(x)), under transformers' names (GatedMLP) or
Mistral's and gpt-fast's (SwiGLU)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from vocalis.stages.layers.quantized_linear import QuantizedLinear


class GatedMLP(nn.Module):
    """`gate_up_proj`: set (in place of the two) by a quantising deploy option, which joins them into one product
    (`fused_inputs`, stages/layers/quantized_linear.py)."""

    fused_inputs: ClassVar[dict[str, tuple[str, ...]]] = {"gate_up_proj": ("gate_proj", "up_proj")}

    def __init__(self, hidden: int, intermediate: int, act: Callable[[torch.Tensor], torch.Tensor] = F.silu,
                 bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.act = act
        self.gate_up_proj: QuantizedLinear | None = None  # [gate; up]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_proj is not None:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down_proj(self.act(gate) * up)
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class SwiGLU(nn.Module):
    """The same gated MLP under Mistral's and gpt-fast's tensor names: w2(silu(w1 x) * w3 x), no biases."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))
