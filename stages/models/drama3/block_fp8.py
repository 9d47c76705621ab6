"""Block-quantised FP8 weights (DeepSeek-V3 style, as Drama 3's `bsgemm-moe` experts are published) turned back into
ordinary tensors: one expert at a time just before its matrix product (fp8_experts.py, which keeps the checkpoint's
float8 codes in memory), or a checkpoint's weights, each as a load asks for it (`dequantised`) or all at once
(`dequantize_checkpoint`, the reference the kept form is checked against bit for bit).

A quantised weight `<name>.weight` is float8_e4m3fn [rows, cols] beside `<name>.weight_scale_inv` float32
[ceil(rows / block_rows), ceil(cols / block_cols)]: each block's real value is its FP8 codes times its scale.
Dequantising costs memory: every such weight grows from 1 byte per element to the model's dtype (2 for bfloat16,
4 for float32), which `dequantised_growth` reports for a checkpoint.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from vocalis.stages.layers.weights import DerivedWeights, Recipe, dtype_of, shape_of

SCALE_SUFFIX = "_scale_inv"


def fp8_over_256(codes: torch.Tensor, into: DequantBuffers | None = None) -> torch.Tensor:
    """float32 values of float8_e4m3fn `codes` times 2^-8, exactly (NaN codes excepted: `check_codes` refuses them),
    written into `into`'s buffers where given (and returned: `into.wide`), else into new tensors.

    torch converts float8 to float32 one element at a time on CPU (~15 ms for 2M codes on one core); float16 to
    float32 is vectorised. An e4m3 code's sign, 4 exponent and 3 mantissa bits, moved into float16's sign bit and the
    low exponent / high mantissa bits, read as float16 give the code's value times 2^(7 - 15), subnormals included:
    four int16 passes and one conversion, about 5x faster."""
    into = into or DequantBuffers.like(codes, torch.float32)
    into.bits.copy_(codes.view(torch.int8))  # sign-extended
    torch.bitwise_and(into.bits, 0x7F, out=into.low).bitwise_left_shift_(7)
    into.low.bitwise_or_(into.bits.bitwise_and_(-32768))
    return into.wide.copy_(into.low.view(torch.float16))


@dataclass(frozen=True)
class DequantBuffers:
    """The working tensors of one dequantisation of a [rows, cols] FP8 matrix into `out` ([rows, cols] in the compute
    dtype; `wide` itself for float32)."""

    bits: torch.Tensor
    low: torch.Tensor
    wide: torch.Tensor
    out: torch.Tensor

    @classmethod
    def like(cls, codes: torch.Tensor, dtype: torch.dtype) -> DequantBuffers:
        def empty(kind: torch.dtype) -> torch.Tensor:
            return torch.empty(codes.shape, dtype=kind, device=codes.device)

        wide = empty(torch.float32)
        return cls(empty(torch.int16), empty(torch.int16), wide, wide if dtype == torch.float32 else empty(dtype))


class DequantScratch:
    """Buffers kept per thread for dequantising one matrix at a time (fp8_experts.py: every expert a step reaches, on
    every step). Fresh temporaries of this size (8 MiB of float32 for a [1024, 2048] gate_up) come from the kernel on
    each call and fault their pages in again: at Drama 3's widths that took 2-3x the arithmetic itself. A thread's
    buffers for a (slot, shape, dtype, device) are reused; what `dequantize_block_fp8` returns through them stays
    valid until that thread's next call for the same slot. Tensors made under inference mode are kept apart from the
    others (they cannot be written outside it)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def buffers(self, slot: str, codes: torch.Tensor, dtype: torch.dtype) -> DequantBuffers:
        kept = self._local.__dict__.setdefault("buffers", {})
        key = (slot, tuple(codes.shape), dtype, codes.device, torch.is_inference_mode_enabled())
        if key not in kept:
            kept[key] = DequantBuffers.like(codes, dtype)
        return kept[key]


def check_codes(name: str, codes: torch.Tensor) -> None:
    """Raise if float8_e4m3fn `codes` hold a NaN (S.1111.111): no quantiser writes one, and `fp8_over_256` would
    read it as a finite number."""
    if ((codes.view(torch.uint8) & 0x7F) == 0x7F).any():
        raise ValueError(f"{name} holds NaN FP8 codes")


def dequantize_block_fp8(weight: torch.Tensor, scale_inv: torch.Tensor, block: tuple[int, int],
                         dtype: torch.dtype = torch.float32, into: DequantBuffers | None = None) -> torch.Tensor:
    """weight [R, C] (float8) times its per-block scales [ceil(R/br), ceil(C/bc)], in `dtype`. Each element is the
    float32 product of its code and its scale, rounded once (`weight.float() * scale` bit for bit: the code's value
    is taken times 2^-8 and the scale times 2^8, both exact), then cast to `dtype`. With `into` (buffers of the
    weight's shape, `dtype`) the result is written in place there (`into.out`): the same bits, no allocation."""
    rows, cols = weight.shape
    br, bc = block
    expected = (-(-rows // br), -(-cols // bc))
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"a [{rows}, {cols}] FP8 weight with {list(block)} blocks needs scales of shape {list(expected)}, "
                         f"got {list(scale_inv.shape)}")
    values, scale = fp8_over_256(weight, into), scale_inv.float() * 256.0
    if rows % br == 0 and cols % bc == 0:  # whole blocks: broadcast the scales instead of spelling them out
        values.view(rows // br, br, cols // bc, bc).mul_(scale[:, None, :, None])
    else:
        values.mul_(scale.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols])
    return values.to(dtype) if into is None else into.out.copy_(values)


def quantize_block_fp8(weight: torch.Tensor, block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse, for building checkpoints in the published layout: (float8_e4m3fn codes, float32 scale_inv)."""
    rows, cols = weight.shape
    br, bc = block
    padded = torch.nn.functional.pad(weight.float(), (0, (-cols) % bc, 0, (-rows) % br))
    blocks = padded.view(padded.shape[0] // br, br, padded.shape[1] // bc, bc)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12)
    scale = amax / torch.finfo(torch.float8_e4m3fn).max
    codes = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn).view(padded.shape)[:rows, :cols]
    return codes.contiguous(), scale


def dequantised(weights: Mapping[str, torch.Tensor], block: tuple[int, int],
                dtype: torch.dtype = torch.float32) -> DerivedWeights:
    """Every `<x>.weight` with a `<x>.weight_scale_inv` beside it dequantised when asked for, reading just it and its
    scales; the scales dropped; others unchanged. A float8 tensor without scales (by its dtype, read from the file's
    header where `weights` reads one), or scales without their weight, raises naming it."""
    recipes: dict[str, Recipe] = {}
    for name in weights:
        if name.endswith(SCALE_SUFFIX):
            if name[: -len(SCALE_SUFFIX)] not in weights:
                raise ValueError(f"{name} has no FP8 weight beside it")
        elif name + SCALE_SUFFIX in weights:
            recipes[name] = (shape_of(weights, name), lambda name=name: _dequantised(name, weights, block, dtype))
        elif dtype_of(weights, name) == torch.float8_e4m3fn:
            raise ValueError(f"{name} is float8 but the checkpoint has no {name}{SCALE_SUFFIX}")
        else:
            recipes[name] = (shape_of(weights, name), lambda name=name: weights[name])
    return DerivedWeights(recipes)


def _dequantised(name: str, weights: Mapping[str, torch.Tensor], block: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    codes = weights[name]
    check_codes(name, codes)
    return dequantize_block_fp8(codes, weights[name + SCALE_SUFFIX], block, dtype)


def dequantize_checkpoint(weights: Mapping[str, torch.Tensor], block: tuple[int, int],
                          dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """`dequantised`, every tensor made at once."""
    return dict(dequantised(weights, block, dtype))


def dequantised_growth(weights: Mapping[str, torch.Tensor], dtype: torch.dtype) -> int:
    """Bytes that dequantising the FP8 weights of `weights` into `dtype` adds (scales dropped), from their shapes."""
    grow = torch.tensor([], dtype=dtype).element_size() - 1
    return sum(math.prod(shape_of(weights, n)) * grow - math.prod(shape_of(weights, n + SCALE_SUFFIX)) * 4
               for n in weights if n + SCALE_SUFFIX in weights)
