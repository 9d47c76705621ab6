"""Linear layers whose weights are laid out ahead for oneDNN's matrix product: the CPU kernel behind the
`packed_linears` deploy setting (on by default; which linears it replaces: stages/layers/quantized_linear.py; which
stages get it: stages/models/quantizable.py).

The weight keeps its dtype (float32 or bfloat16): only its layout in memory changes, once, at load
(`mkldnn._reorder_linear_weight`), and each call runs oneDNN's inner product on it (`mkldnn._linear_pointwise`, the
op torch's own compiler lowers a frozen CPU linear to). nn.Linear's product on a CPU goes through torch's BLAS (MKL in
the PyPI wheels), which reads the plain [out, in] weight at about half the rate a copy reaches on the AMD EPYC these
benches run on, and its float32 product at 2-16 rows costs twice its one-row product. Measured there
(bench/small_batch_linear.py, a [rows, 2048] x [6144, 2048] linear, weights cold, 2 threads): float32 1.6x faster
at one row, 2.2-3.9x at 2-16 rows, 1.6x at 64; bfloat16 1.0-1.35x. GLM-TTS's float32 LM step at one row:
0.30 -> 0.15 s (BENCHMARKS.md, "Prepacked linears").

Not bit for bit nn.Linear's: the two libraries sum the products in different orders, so a result differs within the
dtype's rounding of the sum, as it does between one BLAS build and another.
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.quantized_linear import join_linears

DTYPES = (torch.float32, torch.bfloat16)


def available(dtype: torch.dtype) -> bool:
    """Whether this torch build and CPU run oneDNN's inner product in `dtype` natively."""
    if dtype not in DTYPES or not torch.backends.mkldnn.is_available():
        return False
    return dtype != torch.bfloat16 or bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


class PackedLinear(nn.Module):
    """y = x W^T + b, W held in oneDNN's layout, in the linears' dtype.

    Given several linears of one input (a layer's q, k and v), it is their concatenation: one product for all of
    them, each part of the output what that linear alone gives up to the order of its sum."""

    def __init__(self, *linears: nn.Linear) -> None:
        super().__init__()
        if len({linear.weight.dtype for linear in linears}) != 1 or not all(self.accepts(linear) for linear in linears):
            raise ValueError(f"PackedLinear takes CPU linears of one dtype among {[str(d) for d in DTYPES]} that oneDNN "
                             f"runs here; got {[(str(linear.weight.dtype), str(linear.weight.device)) for linear in linears]}")
        dtype = linears[0].weight.dtype
        joined = join_linears("PackedLinear", linears)
        self.out_features, self.in_features = joined.weight.shape
        self.parts = joined.parts
        # The layout oneDNN picks for one row (the batch-size hint), a decode step's: a float32 Llama step at one row
        # took half the time in it that it took in the default layout, which is ~1.2x faster at 4-16 rows.
        self.register_buffer("weight_packed", torch.ops.mkldnn._reorder_linear_weight(joined.weight.to(dtype), 1), persistent=False)
        self.register_buffer("bias", None if joined.bias is None else joined.bias.to(dtype), persistent=False)

    @staticmethod
    def accepts(linear: nn.Linear) -> bool:
        """A linear on the CPU in a dtype oneDNN runs natively here."""
        return linear.weight.device.type == "cpu" and available(linear.weight.dtype)

    @property
    def dtype(self) -> torch.dtype:
        return self.weight_packed.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.dtype != self.weight_packed.dtype:
            rows = rows.to(self.weight_packed.dtype)
        out = torch.ops.mkldnn._linear_pointwise(rows, self.weight_packed, self.bias, "none", [], "")
        return out.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, dtype={self.dtype}"
