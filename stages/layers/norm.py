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

    @property
    def scale(self) -> torch.Tensor:
        """The weight the normalised x is multiplied by (the stored one plus `weight_offset`)."""
        return self.weight + self.weight_offset if self.weight_offset else self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.scale
        if x.dtype == torch.float32 and weight.dtype == torch.float32:
            # torch's own rms_norm runs the float32 lines below as one call: on a CPU the same ops, bit for bit
            # (tested), without a Python dispatch each; a decode step runs several hundred norms. (On CUDA it may
            # be a fused kernel, rounding differently within float32.)
            return F.rms_norm(x, (x.shape[-1],), weight, self.eps)
        return weight * self.normalize(x) if self.upcast else self.normalize(x) * weight

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """x / rms(x), before the weight: `forward(x)` is this times `scale`, bit for bit (tested), so norms of the
        same eps over several tensors can run as one call on their concatenation, each part then scaled by its own
        weight (QKVAttention's joined q/k-norm)."""
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            return F.rms_norm(x, (x.shape[-1],), None, self.eps)
        if not self.upcast:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        upcast = x.float()
        return (upcast * torch.rsqrt(upcast.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}, upcast={self.upcast}"
