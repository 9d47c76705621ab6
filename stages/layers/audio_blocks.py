"""Shared blocks of neural audio codecs and vocoders: Snake activations, causal convolutions, residual units and
residual vector quantisation.

Module attributes keep the names the checkpoints use; where two families spell the same block differently
(`act1`/`conv1` against `snake1`/`conv1` against a `block` Sequential), the spelling is a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

# -- activations -----------------------------------------------------------------------------------


class Snake(nn.Module):
    """x + sin^2(alpha x) / alpha, per channel (`alpha` [1, C, 1], as DAC and AudioVAE store it; [C] with `flat`, as
    BigVGAN-style HiFT vocoders do)."""

    def __init__(self, channels: int, flat: bool = False) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels) if flat else torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.view(1, -1, 1)
        # x + (alpha + 1e-9)^-1 sin^2(alpha x), in place after the first product: the same values, one allocation
        # of x's size instead of four (a codec's activations are its largest tensors)
        return torch.mul(alpha, x).sin_().pow_(2).mul_((alpha + 1e-9).reciprocal()).add_(x)


class HalfSnake(nn.Module):
    """Snake on the first half of the channels (`snake_act`), LeakyReLU (slope 0.01) on the rest (NeMo's codecs)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.snake_channels = channels // 2
        self.snake_act = Snake(self.snake_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = self.snake_channels
        return torch.cat([self.snake_act(x[:, :half]), F.leaky_relu(x[:, half:], 0.01)], dim=1)


class SnakeBeta(nn.Module):
    """x + sin^2(x e^alpha) / e^beta, per channel (`alpha`, `beta` [C], stored in log scale, as BigVGAN-style decoders)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.exp()[None, :, None]
        beta = self.beta.exp()[None, :, None]
        return torch.mul(x, alpha).sin_().pow_(2).div_(beta + 1e-9).add_(x)  # in place after the product, as Snake


# -- causal convolutions -----------------------------------------------------------------------------


class CausalConv1d(nn.Conv1d):
    """Conv1d that sees only the past: padded on the left by (effective kernel - stride).

    `whole_strides`: also pad on the right just enough that the last stride is complete, so the output has
    ceil(length / stride) frames (Mimi/Qwen3 codecs). `pad_mode`: F.pad's mode ("constant" is zeros).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, dilation: int = 1,
                 groups: int = 1, bias: bool = True, whole_strides: bool = False, pad_mode: str = "constant") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, groups=groups, bias=bias)
        self.effective_kernel = (kernel_size - 1) * dilation + 1
        self.left = self.effective_kernel - stride
        self.whole_strides = whole_strides
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        right = 0
        if self.whole_strides:
            length, stride = x.shape[-1], self.stride[0]
            frames = math.ceil((length - self.effective_kernel + self.left) / stride + 1)
            right = (frames - 1) * stride + (self.effective_kernel - self.left) - length
        if self.pad_mode == "constant":
            x = F.pad(x, (self.left, right))
        else:
            x = F.pad(x, (self.left, right), mode=self.pad_mode)
        return super().forward(x)


WEIGHT_BOUND = 8
"""A transposed convolution whose weight has this many times the elements of its output is run as a matrix product."""


def conv_transpose1d(x: torch.Tensor, weight: torch.Tensor, stride: int, groups: int = 1) -> torch.Tensor:
    """`F.conv_transpose1d(x, weight, None, stride, groups=groups)` (no bias, padding or dilation): x [B, Cin, T],
    weight [Cin, Cout, K], out [B, Cout, (T - 1) * stride + K].

    A call whose weight outweighs its output WEIGHT_BOUND times (an upsampler of many channels over a short chunk:
    a streamed codec's first chunk, a decode step's few frames) is one matrix product x^T W, each input frame's K
    taps then added at its place. torch's transposed convolution re-lays out the whole weight at every call on
    this CPU: Qwen3-TTS's 1536 -> 768 upsampler (stride 8, 19M weights) took ~25 ms in bfloat16 and ~50 ms in
    float32 at any chunk up to a few frames, the product 2.5 and 10 ms. Past the bound, where the output dominates,
    torch's kernel is as fast or faster and runs. The two sum each output's terms in another order: equal within
    rounding (tested), not bit for bit."""
    batch, inputs, length = x.shape
    _, outputs, kernel = weight.shape
    out_length = (length - 1) * stride + kernel
    if groups != 1 or weight.numel() < WEIGHT_BOUND * batch * outputs * out_length:
        return F.conv_transpose1d(x, weight, None, stride, groups=groups)
    taps = torch.matmul(x.transpose(1, 2), weight.reshape(inputs, outputs * kernel)).view(batch, length, outputs, kernel)
    spans = -(-kernel // stride)  # input frames one output stride hears from
    out = taps.new_zeros(batch, outputs, length + spans - 1, stride)
    for span in range(spans):  # the taps span*stride .. of every frame land `span` strides after it
        width = min(stride, kernel - span * stride)
        out[:, :, span : span + length, :width] += taps[..., span * stride : span * stride + width].transpose(1, 2)
    return out.view(batch, outputs, -1)[..., :out_length]


class CausalConvTranspose1d(nn.ConvTranspose1d):
    """ConvTranspose1d trimmed on the right by (kernel - stride), so its output is exactly stride x its input.
    `groups`: grouped upsampling (NeMo's HiFi-GAN decoders use one group per output channel). Runs through
    `conv_transpose1d` (a matrix product where the weight outweighs the output)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, bias: bool = True,
                 groups: int = 1) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, bias=bias, groups=groups)
        self.trim = kernel_size - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = conv_transpose1d(x, self.weight, self.stride[0], self.groups)
        out = out[..., : out.shape[-1] - self.trim] if self.trim > 0 else out
        return out if self.bias is None else out + self.bias[:, None]


class Nested(nn.Module):
    """A layer held one level down as `conv`, as codec checkpoints nest their (transposed) convolutions
    (`causal_stream` streams it as that layer)."""

    def __init__(self, conv: nn.Module) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def nested_causal_conv(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, dilation: int = 1,
                       groups: int = 1, bias: bool = True, pad_mode: str = "constant") -> Nested:
    """A causal convolution padded on the right to whole strides, held as `conv`."""
    return Nested(CausalConv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, groups=groups,
                               bias=bias, whole_strides=True, pad_mode=pad_mode))


class CausalConvNeXtBlock(nn.Module):
    """x + gamma * pwconv2(gelu(pwconv1(norm(dwconv(x))))), the depthwise kernel-7 convolution causal (after each
    upsampling of the Fish DAC and Qwen3-TTS decoders)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nested_causal_conv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(x, self.dwconv(x))

    def pointwise(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """The block after its convolution: x its input, h the convolution's output."""
        h = self.norm(h.transpose(1, 2))
        h = self.gamma * self.pwconv2(F.gelu(self.pwconv1(h)))
        return x + h.transpose(1, 2)


# -- residual units ---------------------------------------------------------------------------------

RESIDUAL_DILATIONS = (1, 3, 9)
"""The dilations of the three residual units of a DAC / BigVGAN / AudioVAE block."""


class BlockSequence(nn.Module):
    """Layers run in order under a DAC-style codec's tensor names: one `block` Sequential (`block.0`, `block.1`, ...),
    as its encoder and decoder blocks hold them."""

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class ResidualUnit(nn.Module):
    """x + conv2(act2(conv1(act1(x)))), conv1 dilated and conv2 1x1.

    `names`: the checkpoint's attribute names of the four layers; None keeps them in a `block` Sequential.
    When the convolutions are not padded to keep the length, x is trimmed equally on both sides to match (DAC).
    """

    def __init__(self, act1: nn.Module, conv1: nn.Module, act2: nn.Module, conv2: nn.Module,
                 names: tuple[str, str, str, str] | None = None) -> None:
        super().__init__()
        layers = (act1, conv1, act2, conv2)
        self.names = names
        if names is None:
            self.block = nn.Sequential(*layers)
        else:
            for name, layer in zip(names, layers, strict=True):
                self.add_module(name, layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.names is None:
            y = self.block(x)
        else:
            y = x
            for name in self.names:
                y = getattr(self, name)(y)
        trim = (x.shape[-1] - y.shape[-1]) // 2
        if trim > 0:
            x = x[..., trim:-trim]
        return x + y


def snake_residual_units(channels: int, conv: Callable[[int, int, int, int], nn.Module],
                         act: Callable[[int], nn.Module] = Snake, names: tuple[str, str, str, str] | None = None,
                         dilations: Sequence[int] = RESIDUAL_DILATIONS, kernel_size: int = 7) -> list[ResidualUnit]:
    """One residual unit per dilation: act, conv(channels, channels, kernel_size, dilation), act, conv(..., 1, 1).

    `conv(in, out, kernel, dilation)` builds each convolution (causal, grouped or centred, as the family has it)."""
    return [
        ResidualUnit(act(channels), conv(channels, channels, kernel_size, d), act(channels), conv(channels, channels, 1, 1), names)
        for d in dilations
    ]


# -- residual vector quantisation -----------------------------------------------------------------------


def nearest_code(x: torch.Tensor, codebook: torch.Tensor, exact_distance: bool = True) -> torch.Tensor:
    """Index [N] of the nearest codebook row [K, D] (Euclidean) for each row of x [N, D].

    `exact_distance`: torch.cdist in float32 (Mimi); otherwise the expanded |x|^2 - 2 x.c + |c|^2 in x's dtype, as
    DAC-style quantisers compute it (ties can resolve differently, so each family keeps its reference's form)."""
    if exact_distance:
        return torch.cdist(x[None].float(), codebook[None].float())[0].argmin(-1)
    embed = codebook.t()
    distance = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed + embed.pow(2).sum(0, keepdim=True))
    return distance.max(dim=-1).indices


class Quantizer(Protocol):
    def encode(self, x: torch.Tensor) -> torch.Tensor: ...

    def decode(self, codes: torch.Tensor) -> torch.Tensor: ...


def residual_encode(x: torch.Tensor, stages: Sequence[Quantizer]) -> list[torch.Tensor]:
    """Codes of x, one per stage: each stage quantises what the stages before it left over."""
    residual, codes = x, []
    for stage in stages:
        index = stage.encode(residual)
        residual = residual - stage.decode(index)
        codes.append(index)
    return codes


def summed_lookup(codes: torch.Tensor, tables: Sequence[torch.Tensor]) -> torch.Tensor:
    """codes [..., K] to [..., D]: the sum over k of tables[k][codes[..., k]]."""
    total = F.embedding(codes[..., 0], tables[0])
    for k in range(1, len(tables)):
        total = total + F.embedding(codes[..., k], tables[k])
    return total


class FactorizedVQ(nn.Module):
    """One stage of DAC's residual quantiser: `in_proj` to a small code space, a cosine nearest-neighbour lookup in
    `codebook`, `out_proj` back (both projections 1x1 convolutions). Works on [B, D, T]."""

    def __init__(self, input_dim: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        self.in_proj = nn.Conv1d(input_dim, codebook_dim, 1)
        self.out_proj = nn.Conv1d(codebook_dim, input_dim, 1)
        self.codebook = nn.Embedding(codebook_size, codebook_dim)

    def quantize(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(codes [B, T], the quantised z [B, D, T]) of z [B, D, T]."""
        z_e = self.in_proj(z)
        b, d, t = z_e.shape
        flat = z_e.transpose(1, 2).reshape(b * t, d)
        codes = nearest_code(F.normalize(flat), F.normalize(self.codebook.weight), exact_distance=False).view(b, t)
        z_q = self.codebook(codes).transpose(1, 2)
        # The reference's straight-through form, z_e + (z_q - z_e), kept for its rounding.
        return codes, self.out_proj(z_e + (z_q - z_e))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T] to [B, D, T]."""
        return self.out_proj(self.codebook(codes).transpose(1, 2))


def factorized_rvq_encode(z: torch.Tensor, stages: Sequence[FactorizedVQ]) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [B, K, T], their summed reconstruction [B, D, T]): each stage quantises what the ones before left."""
    residual, total, codes = z, torch.zeros_like(z), []
    for stage in stages:
        index, z_q = stage.quantize(residual)
        total = total + z_q
        residual = residual - z_q
        codes.append(index)
    return torch.stack(codes, dim=1), total


def factorized_rvq_decode(codes: torch.Tensor, stages: Sequence[FactorizedVQ]) -> torch.Tensor:
    """codes [B, K, T] to the sum of each stage's decoded vectors [B, D, T]."""
    total = stages[0].decode(codes[:, 0])
    for k in range(1, len(stages)):
        total = total + stages[k].decode(codes[:, k])
    return total
