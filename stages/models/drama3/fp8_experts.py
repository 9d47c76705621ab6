"""Drama 3's routed experts kept as published: float8_e4m3fn codes with a float32 scale per [128, 128] block,
dequantised one expert at a time, into the activations' dtype, just before its matrix products. The model holds 1
byte per expert weight (plus 4 per block) instead of the serving dtype's 2 or 4, and pays for it by converting each
expert a step reaches on every call.

The dequantised values are exactly `dequantize_block_fp8`'s (float32 code times float32 scale, then the compute
dtype), so the products are those of a checkpoint dequantised on load, bit for bit. No FP8 matrix product is used on
any device: CPUs have none, and a GPU's scaled FP8 matmul (where its torch build takes [128, 128] block scales) would
round the products otherwise; it has not been tried on a device here.

Fused like `Experts` (stages/layers/moe.py): `gate_up_proj` [E, 2I, H] holds each expert's gate rows then its up
rows, `down_proj` [E, H, I]; their scales `gate_up_proj_scale_inv` [E, 2 ceil(I/128), ceil(H/128)] (the gate rows'
blocks then the up rows') and `down_proj_scale_inv` [E, ceil(H/128), ceil(I/128)]. When I is not a whole number of
blocks, gate and up are dequantised apart, since their blocks do not tile the stacked rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import torch

from vocalis.stages.layers.moe import RoutedExperts, fuse_expert_weights
from vocalis.stages.layers.weights import DerivedWeights, dtype_of, merged, renamed
from vocalis.stages.models.drama3.block_fp8 import (
    SCALE_SUFFIX,
    DequantScratch,
    check_codes,
    dequantised,
    dequantize_block_fp8,
)

FP8 = torch.float8_e4m3fn
SCRATCH = DequantScratch()
"""Shared by every layer's experts: one set of buffers per thread, not per layer (~30 MiB at Drama 3's widths)."""
_EXPERT = re.compile(r".*\.experts\.\d+\.(gate|up|down)_proj\.weight")


def _blocks(size: int, block: int) -> int:
    return -(-size // block)


class BlockFp8Experts(RoutedExperts):
    def __init__(self, num_experts: int, hidden: int, intermediate: int, block: tuple[int, int]) -> None:
        super().__init__(num_experts)
        self.intermediate, self.block = intermediate, block
        br, bc = block
        self.register_buffer("gate_up_proj", torch.zeros(num_experts, 2 * intermediate, hidden, dtype=FP8))
        self.register_buffer("gate_up_proj" + SCALE_SUFFIX,
                             torch.ones(num_experts, 2 * _blocks(intermediate, br), _blocks(hidden, bc)))
        self.register_buffer("down_proj", torch.zeros(num_experts, hidden, intermediate, dtype=FP8))
        self.register_buffer("down_proj" + SCALE_SUFFIX,
                             torch.ones(num_experts, _blocks(hidden, br), _blocks(intermediate, bc)))

    def expert_weights(self, expert: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Written into this thread's scratch buffers (`SCRATCH`): valid until the next expert's."""
        codes, scales = self.gate_up_proj[expert], self.gate_up_proj_scale_inv[expert]
        if self.intermediate % self.block[0] == 0:
            gate_up = dequantize_block_fp8(codes, scales, self.block, dtype, SCRATCH.buffers("gate_up", codes, dtype))
        else:
            rows, half = self.intermediate, scales.shape[0] // 2
            gate_up = torch.cat([dequantize_block_fp8(codes[:rows], scales[:half], self.block, dtype),
                                 dequantize_block_fp8(codes[rows:], scales[half:], self.block, dtype)])
        down_codes = self.down_proj[expert]
        down = dequantize_block_fp8(down_codes, self.down_proj_scale_inv[expert], self.block, dtype,
                                    SCRATCH.buffers("down", down_codes, dtype))
        return gate_up, down

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> BlockFp8Experts:
        """`model.to(device, dtype)`, `.cuda()`, `.bfloat16()` move the codes and scales but never change their dtypes
        (a cast would widen the codes and round the scales); the compute dtype is the activations'. An in-place
        function (`share_memory_`) is applied as it is."""
        probe = torch.empty(0, dtype=torch.float8_e5m2, device=self.gate_up_proj.device)  # no cast target leaves it be
        moved = fn(probe)
        for name, tensor in self._buffers.items():
            if tensor is not None:
                self._buffers[name] = fn(tensor) if moved is probe else tensor.to(moved.device)
        return self


def fuse_fp8_experts(weights: Mapping[str, torch.Tensor], block: tuple[int, int],
                     dtype: torch.dtype = torch.float32) -> DerivedWeights:
    """The published per-expert FP8 codes and their scales fused as `BlockFp8Experts` holds them, codes staying
    float8; any other FP8 weight dequantised into `dtype` (`dequantised`); the rest unchanged. Each tensor is made
    when asked for (a fused one from its layer's experts only). An expert weight that is not FP8 with its scales
    raises naming it, before anything is read (dtypes from the file's header); NaN codes raise as they are read."""
    codes = {n for n in weights if _EXPERT.fullmatch(n)}
    plain = sorted(n for n in codes if n + SCALE_SUFFIX not in weights or dtype_of(weights, n) != FP8)
    if plain:
        raise ValueError(f"{plain[0]} is not FP8 with its {SCALE_SUFFIX} though the experts are quantised")
    scales = {n + SCALE_SUFFIX for n in codes}
    others = renamed(dequantised(weights, block, dtype), lambda n: None if n in codes else n)  # experts' recipes unused
    experts = fuse_expert_weights(renamed(weights, lambda n: n if n in codes else None, _checked))
    expert_scales = fuse_expert_weights(renamed(weights, lambda n: n[: -len(SCALE_SUFFIX)] if n in scales else None))
    return merged(others, experts, renamed(expert_scales, lambda n: n + SCALE_SUFFIX))


def _checked(name: str, codes: torch.Tensor) -> torch.Tensor:
    check_codes(name, codes)
    return codes
