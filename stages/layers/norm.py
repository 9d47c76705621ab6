"""RMSNorm, with the variants families differ in as parameters."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """x / rms(x) * weight over the last dimension.

    `upcast`: compute the mean square and the normalisation in float32 and cast back before the weight (Qwen3,
    MiniCPM, OmniVoice); without it the whole norm runs in the input's dtype. `weight_offset`: the weight is stored
    as an offset from this value (Gemma-style `1 + weight`); 0 for every family served today.
    """

    def __init__(self, dim: int, eps: float = 1e-6, upcast: bool = True, weight_offset: float = 0.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((dim,), 1.0 - weight_offset))
        self.eps = eps
        self.upcast = upcast
        self.weight_offset = weight_offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight + self.weight_offset if self.weight_offset else self.weight
        if x.dtype == torch.float32 and weight.dtype == torch.float32:
            # torch's own rms_norm runs the float32 lines below as one call: on a CPU the same ops, bit for bit
            # (tested), without a Python dispatch each; a decode step runs several hundred norms. (On CUDA it may
            # be a fused kernel, rounding differently within float32.)
            return F.rms_norm(x, (x.shape[-1],), weight, self.eps)
        if not self.upcast:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * x.to(dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}, upcast={self.upcast}"
