"""KV-cache memory in fixed-size blocks, sized by a byte budget rather than `max_num_seqs x max_len`.

Keys and values of every layer live in `num_blocks` blocks of `block_size`
positions; the BlockManager (torch-free, block_manager.py) says which blocks each
sequence holds. A sequence takes blocks as it grows, so the cache is shared by
however many sequences fit, long or short.
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.block_manager import BlockManager, CacheShape
from vocalis.stages.runtime.decode_context import DecodeContext
from vocalis.stages.runtime.linear_attention import RecurrentStates

__all__ = ["CacheShape", "PagedKVCache", "SlotKVCache", "kv_cache_budget"]


KEPT_CONTEXT_SHARE = 1.0
"""On CPU, decode steps may keep their gathered contexts (decode_context.py) in up to this share of the cache's bytes
more (so KV memory stays within twice the budget); a step whose padded contexts would need more gathers per layer."""


class PagedKVCache:
    """k and v: [num_layers, num_blocks, block_size, num_kv_heads, head_dim], allocated once at start-up (on CPU as
    pages the kernel zeroes on first touch: resident memory grows with the blocks used, up to the budget).

    `states`: the per-sequence recurrent states of a model's linear-attention layers, held beside the blocks (set
    by the stage for such a model; None otherwise)."""

    states: RecurrentStates | None = None

    def __init__(
        self,
        shape: CacheShape,
        num_blocks: int,
        block_size: int = 16,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        self.shape = shape
        self.blocks = BlockManager(num_blocks, block_size)
        self.device = torch.device(device)
        size = (shape.num_layers, num_blocks, block_size, shape.num_kv_heads, shape.head_dim)
        self.k = _zeros(size, dtype, self.device)
        self.v = _zeros(size, dtype, self.device)
        self._gathered: tuple[torch.Tensor, torch.Tensor] | None = None
        self.decode_context: DecodeContext | None = None
        """Decode steps' contexts kept from step to step (CPU; at most one more copy of the blocks in use)."""
        if self.device.type != "cpu":
            # reusable destinations would outlive a captured CUDA graph's view of them when grown; the GPU's caching
            # allocator makes fresh ones cheap anyway
            self.gather_buffers = None  # type: ignore[assignment]
        else:
            self.decode_context = DecodeContext(self.k, self.v, -(-shape.max_len // block_size),
                                                max_bytes=int(KEPT_CONTEXT_SHARE * self.bytes))

    @classmethod
    def from_budget(
        cls, shape: CacheShape, budget_bytes: int, block_size: int = 16, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
    ) -> PagedKVCache:
        """As many blocks as fit in `budget_bytes`."""
        block_bytes = shape.bytes_per_position(dtype.itemsize) * block_size
        num_blocks = budget_bytes // block_bytes
        if num_blocks < 1:
            raise ValueError(f"a KV-cache budget of {budget_bytes} bytes holds no block of {block_bytes} bytes; raise kv_cache_bytes")
        return cls(shape, int(num_blocks), block_size, dtype, device)

    def gather_buffers(self, blocks: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Destinations [blocks, block_size, Hkv, D] for one layer's gathered keys and values, reused by every layer
        and step (a layer's are read before the next layer gathers), grown when a step needs more."""
        if self._gathered is None or self._gathered[0].shape[0] < blocks:
            shape = (max(blocks, 2 * (self._gathered[0].shape[0] if self._gathered else 0)), *self.k.shape[2:])
            self._gathered = (torch.empty(shape, dtype=self.k.dtype, device=self.device),
                              torch.empty(shape, dtype=self.v.dtype, device=self.device))
        return self._gathered[0][:blocks], self._gathered[1][:blocks]

    @property
    def block_size(self) -> int:
        return self.blocks.block_size

    @property
    def num_blocks(self) -> int:
        return self.blocks.num_blocks

    @property
    def num_free(self) -> int:
        """Free blocks."""
        return self.blocks.num_free

    @property
    def bytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    def batch(self, block_tables: list[list[int]], start_positions: list[int], query_lens: list[int],
              state_slots: list[int] | None = None, continues: bool = False) -> AttentionBatch:
        """Where a step's flattened tokens go (and, with `state_slots`, whose recurrent state each continues), on the
        cache's device. `continues`: a decode-only step of exactly the sequences of the last step built here, in the
        same order, each one position on (the caller knows; the cache cannot tell a sequence from another that took
        its place): its attention then reads each sequence's context kept from that step (DecodeContext)."""
        batch = AttentionBatch.build(block_tables, start_positions, query_lens, self.block_size, self.device, state_slots)
        context = self.decode_context
        if context is not None:
            if len(batch.groups) == 1 and batch.groups[0].whole and all(n == 1 for n in query_lens):
                group = batch.groups[0]
                batch.decode = context.plan(group.block_tables, group.query_positions.view(-1), group.out_tokens,
                                            group.context_len, continues)
            else:
                context.invalidate()
        return batch


def _zeros(size: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zeros of `size`. On CPU, from calloc (numpy's zeros): a large block is fresh pages that the kernel zeroes as
    they are first touched, so the budget costs address space at start and resident memory only as blocks are used;
    torch.zeros writes every byte at once (0.8 s and 2 GiB resident for a 2 GiB budget before the first request)."""
    if device.type != "cpu":
        return torch.zeros(size, dtype=dtype, device=device)
    raw = np.zeros(math.prod(size) * dtype.itemsize, dtype=np.uint8)
    return torch.from_numpy(raw).view(dtype).view(size)


SlotKVCache = PagedKVCache
"""The former name, kept for families' type annotations."""


def kv_cache_budget(
    shape: CacheShape,
    dtype: torch.dtype,
    device: str | torch.device,
    max_num_seqs: int,
    kv_cache_bytes: int = 0,
    kv_cache_fraction: float = 0.0,
) -> int:
    """Bytes of KV cache to allocate: `kv_cache_bytes` if set, else `kv_cache_fraction` of the device's free memory
    (of the machine's physical memory on CPU), else room for `max_num_seqs` sequences of `shape.max_len`."""
    if kv_cache_bytes > 0:
        return kv_cache_bytes
    if kv_cache_fraction > 0:
        device = torch.device(device)
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
        else:
            free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return int(free * kv_cache_fraction)
    element = dtype.itemsize
    return max_num_seqs * shape.max_len * shape.bytes_per_position(element)
