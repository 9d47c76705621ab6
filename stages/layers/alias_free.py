"""Anti-aliased activations of BigVGAN-style decoders: upsample x2 (Kaiser-windowed sinc), act, low-pass, downsample.

The filters are buffers named as the checkpoints store them (`upsample.filter`, `downsample.lowpass.filter`); their
values are fixed by the kernel size, so a checkpoint's copy must equal the one built here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> torch.Tensor:
    """[1, 1, kernel_size] Kaiser-windowed sinc low-pass."""
    even = kernel_size % 2 == 0
    half = kernel_size // 2
    attenuation = 2.285 * (half - 1) * math.pi * 4 * half_width + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False)
    time = torch.arange(-half, half) + 0.5 if even else torch.arange(kernel_size) - half
    kernel = 2 * cutoff * window * torch.sinc(2 * cutoff * time)
    return (kernel / kernel.sum()).view(1, 1, kernel_size)


class UpSample1d(nn.Module):
    """x ratio upsampling by a transposed low-pass, replicate-padded on both sides (looks ahead a few samples)."""

    def __init__(self, ratio: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        self.ratio, self.kernel_size = ratio, kernel_size
        self.pad = kernel_size // ratio - 1
        self.pad_left = self.pad * ratio + (kernel_size - ratio) // 2
        self.pad_right = self.pad * ratio + (kernel_size - ratio + 1) // 2
        self.register_buffer("filter", kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, kernel_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, _ = x.shape
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        # One filter for every channel: channels folded into the batch (a plain convolution is much faster than a
        # depthwise one on CPU, and the same sums).
        x = self.ratio * F.conv_transpose1d(x.reshape(batch * channels, 1, -1), self.filter, stride=self.ratio)
        return x.view(batch, channels, -1)[..., self.pad_left: -self.pad_right]


class LowPassFilter1d(nn.Module):
    def __init__(self, cutoff: float, half_width: float, stride: int, kernel_size: int, causal: bool) -> None:
        super().__init__()
        self.stride = stride
        if causal:
            self.pad_left, self.pad_right = kernel_size - 1, 0
        else:
            even = kernel_size % 2 == 0
            self.pad_left, self.pad_right = kernel_size // 2 - int(even), kernel_size // 2
        self.register_buffer("filter", kaiser_sinc_filter(cutoff, half_width, kernel_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, _ = x.shape
        x = F.pad(x, (self.pad_left, self.pad_right), mode="replicate")
        return F.conv1d(x.reshape(batch * channels, 1, -1), self.filter, stride=self.stride).view(batch, channels, -1)


class DownSample1d(nn.Module):
    def __init__(self, ratio: int = 2, kernel_size: int = 12, causal: bool = False) -> None:
        super().__init__()
        self.lowpass = LowPassFilter1d(0.5 / ratio, 0.6 / ratio, ratio, kernel_size, causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lowpass(x)


class Activation1d(nn.Module):
    """`act` between a x2 upsample and a x2 downsample (`causal`: the downsampling low-pass looks only back)."""

    def __init__(self, act: nn.Module, causal: bool = False, ratio: int = 2, kernel_size: int = 12) -> None:
        super().__init__()
        self.act = act
        self.upsample = UpSample1d(ratio, kernel_size)
        self.downsample = DownSample1d(ratio, kernel_size, causal=causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(self.act(self.upsample(x)))
