"""Streaming a stack of causal convolutions chunk by chunk, equal to running it over the whole sequence at once.

A causal convolution's output at t reads its input back to t - (effective kernel - 1): a stream carries those last
input samples from one chunk to the next (zeros before the first chunk, which is the whole run's left padding). A
causal transposed convolution (`CausalConvTranspose1d`, trimmed on the right) writes each input frame into kernel
samples: the last (kernel - stride) of a chunk overlap the next chunk's first, so a stream carries that overlap tail
(without bias) and adds it there. Pointwise layers need nothing. Each chunk then costs its own frames only.

`CausalStream` runs one call for a batch of rows, each with its own carry (a dict a request keeps between calls,
keyed by module) and its own number of valid frames: rows shorter than the longest are right-padded, and the carry
each row keeps is taken at its own end, never from padding. The shared blocks (`audio_blocks`: a residual unit, a
layer `Nested` as `conv`, the causal ConvNeXt block) stream by rules here; any other model block that is not a plain
stack (a transformer, a family's own residual block) implements `stream(x, carry)` and calls `carry.run` on its
convolutions; a transformer whose queries see a window of the past carries each layer's last (window - 1) keys and
values (`window_mask`, `carried_kv`, `keep_kv`). A request keeps its carry and the frames decoded so far in a
`StreamState`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.attention import causal_mask
from vocalis.stages.layers.audio_blocks import (
    CausalConv1d,
    CausalConvNeXtBlock,
    CausalConvTranspose1d,
    HalfSnake,
    Nested,
    ResidualUnit,
    Snake,
    SnakeBeta,
    conv_transpose1d,
)

Carry = dict[nn.Module, Any]
"""One row's carried tensors ([1, ...] each; a (keys, values) pair for an attention layer), keyed by the module that
carries them; empty before the first chunk."""

POINTWISE = (Snake, SnakeBeta, HalfSnake, nn.ELU, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Tanh, nn.Identity)
"""Layers whose output at t reads their input at t alone: streamed as they are."""


@dataclass
class StreamState:
    """What a streamed decoder carries for one request between calls."""

    carry: Carry = field(default_factory=dict)
    frames: int = 0
    """Frames decoded so far (the position of the next)."""


@runtime_checkable
class Streamable(Protocol):
    def stream(self, x: torch.Tensor, carry: CausalStream) -> torch.Tensor: ...


class CausalStream:
    """One streamed call over a batch: rows[i] is row i's carry (updated in place), frames[i] its valid frames.

    Every layer's time axis is a whole multiple of the frame axis (`valid` scales the frames by it), as in a decoder
    that upsamples frames to samples."""

    def __init__(self, rows: Sequence[Carry], frames: Sequence[int]) -> None:
        if len(rows) != len(frames) or not rows or min(frames) < 1:
            raise ValueError("one carry and at least one frame per row")
        self.rows = rows
        self.frames = list(frames)
        self.longest = max(frames)

    def valid(self, x: torch.Tensor, dim: int = -1) -> list[int]:
        """Each row's valid length along x's time axis `dim`."""
        ratio, rest = divmod(x.shape[dim], self.longest)
        if rest:
            raise ValueError(f"a time axis of {x.shape[dim]} is no multiple of {self.longest} frames")
        return [f * ratio for f in self.frames]

    def gather(self, module: nn.Module, empty: torch.Tensor) -> torch.Tensor:
        """The rows' carries of `module` stacked on dim 0; `empty` ([1, ...], zeros) for a row that has none yet."""
        return torch.cat([row.get(module, empty) for row in self.rows])

    def keep(self, module: nn.Module, x: torch.Tensor, starts: Sequence[int], size: int, dim: int = -1) -> None:
        """Row i carries x[i, ..., starts[i] : starts[i] + size, ...] (along `dim`) for its next call."""
        for i, row in enumerate(self.rows):
            row[module] = x[i : i + 1].narrow(dim, starts[i], size).clone()

    def run(self, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """x [B, C, T] through `module`, streamed."""
        if isinstance(module, CausalConv1d):
            return self.conv(module, x)
        if isinstance(module, CausalConvTranspose1d):
            return self.transposed(module, x)
        if isinstance(module, Nested):
            return self.run(module.conv, x)
        if isinstance(module, CausalConvNeXtBlock):
            return module.pointwise(x, self.run(module.dwconv, x))
        if callable(getattr(module, "stream", None)):  # a Streamable (isinstance on a Protocol is slow per layer)
            return module.stream(x, self)
        if isinstance(module, ResidualUnit):
            layers = [module.block] if module.names is None else [getattr(module, name) for name in module.names]
            y = x
            for layer in layers:
                y = self.run(layer, y)
            return x + y
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            for layer in module:
                x = self.run(layer, x)
            return x
        if isinstance(module, POINTWISE) or (type(module) is nn.Conv1d and module.kernel_size == (1,) and module.stride == (1,)
                                             and module.padding == (0,)):
            return module(x)
        raise TypeError(f"no streaming rule for {type(module).__name__}")

    def conv(self, conv: CausalConv1d, x: torch.Tensor) -> torch.Tensor:
        """A stride-1 causal convolution: the carried last (effective kernel - 1) inputs stand before x. Before a row's
        first chunk stands the whole run's left padding: zeros, or (replicate, reflect) x's own first samples padded."""
        if conv.stride != (1,):
            raise ValueError("only stride-1 causal convolutions stream (a strided one would carry a partial stride)")
        left = conv.left
        if left == 0:
            return nn.Conv1d.forward(conv, x)
        if conv.pad_mode == "constant" or all(conv in row for row in self.rows):
            before = self.gather(conv, x.new_zeros(1, x.shape[1], left))
        else:
            if conv.pad_mode == "reflect" and any(conv not in row and n <= left for row, n in zip(self.rows, self.valid(x), strict=True)):
                raise ValueError(f"a first chunk reflected as left padding needs more than {left} samples")
            first = F.pad(x, (left, 0), mode=conv.pad_mode)[..., :left]  # read from each row's front: never padding
            before = torch.cat([row[conv] if conv in row else first[i : i + 1] for i, row in enumerate(self.rows)])
        full = torch.cat([before, x], dim=-1)
        self.keep(conv, full, self.valid(x), left)  # the last `left` inputs up to each row's end
        return nn.Conv1d.forward(conv, full)

    def transposed(self, conv: CausalConvTranspose1d, x: torch.Tensor) -> torch.Tensor:
        """A causal transposed convolution: the carried overlap tail is added to x's first samples, and x's own tail
        (from its valid frames only: padding is zeroed first) is carried on."""
        if conv.padding != (0,) or conv.output_padding != (0,) or conv.dilation != (1,):
            raise ValueError("a streamed transposed convolution has no padding, output padding or dilation")
        stride, tail = conv.stride[0], conv.trim
        valid = self.valid(x)
        if min(valid) < x.shape[-1]:  # a padded frame would write into its row's carried tail
            lengths = torch.tensor(valid, device=x.device)[:, None, None]
            x = x.masked_fill(torch.arange(x.shape[-1], device=x.device) >= lengths, 0.0)
        y = conv_transpose1d(x, conv.weight, stride, conv.groups)
        if tail > 0:
            y[..., :tail] += self.gather(conv, y.new_zeros(1, y.shape[1], tail))
            self.keep(conv, y, [v * stride for v in valid], tail)
        out = y[..., : x.shape[-1] * stride]
        return out if conv.bias is None else out + conv.bias[:, None]

    def window_mask(self, positions: Sequence[int], length: int, window: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(each row's positions [B, length] of its new frames, the attention mask [B, 1, length, window - 1 + length])
        of a transformer whose queries see `window` positions back, themselves included, over the keys and values
        `carried_kv` gives (the last window - 1 of the row, those before its position 0 masked) and the new ones.
        positions[i]: the frames row i decoded before."""
        held = window - 1
        start = torch.tensor(positions, device=device)[:, None]
        key = torch.arange(-held, length, device=device)  # key slots relative to the first new frame
        mask = causal_mask(length, window, device=device, offset=held) & (key + start >= 0)[:, None]
        return start + torch.arange(length, device=device), mask[:, None]

    def carried_kv(self, module: nn.Module, empty: torch.Tensor) -> list[torch.Tensor]:
        """[keys, values] [B, H, held, D] the rows carry for the attention `module` (`empty` [1, H, held, D], zeros,
        for a row that has none yet), as the list a layer's `kv` argument extends in place."""
        return [torch.cat([row[module][i] if module in row else empty for row in self.rows]) for i in (0, 1)]

    def keep_kv(self, module: nn.Module, kv: Sequence[torch.Tensor], held: int) -> None:
        """Row i carries the last `held` of the keys and values kv [B, H, held + L, D] up to its own end."""
        ends = self.valid(kv[0][:, :, held:], dim=2)  # after the carried ones: row i's last `held` end at its own end
        for i, row in enumerate(self.rows):
            row[module] = tuple(t[i : i + 1, :, ends[i] : ends[i] + held].clone() for t in kv)
