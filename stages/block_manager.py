"""KV-cache bookkeeping in fixed-size blocks: a free list and one block table per sequence. No tensors.

A sequence's cache positions live in blocks of `block_size` positions; its block
table lists them in order, so position p is at offset p % block_size of block
table[p // block_size]. Blocks are taken as a sequence grows and given back when
it finishes or is preempted, so memory follows the positions actually in use,
not `max_num_seqs x max_len`. PagedKVCache (kv_cache.py) owns the tensors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheShape:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    max_len: int
    """Most positions (prompt + generated) one sequence may hold."""

    def bytes_per_position(self, element_size: int) -> int:
        """Keys and values of one position in every layer."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * element_size


class BlockManager:
    """Which blocks are free. Taking and giving back a block is O(1); a freed block is reused first."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1:
            raise ValueError("num_blocks must be >= 1")
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free: deque[int] = deque(range(num_blocks))
        self._used: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def capacity(self) -> int:
        """Positions the whole cache holds."""
        return self.num_blocks * self.block_size

    def blocks_for(self, num_positions: int) -> int:
        return -(-num_positions // self.block_size)

    def missing(self, table: list[int], num_positions: int) -> int:
        """Blocks `table` lacks to hold `num_positions` positions."""
        return max(0, self.blocks_for(num_positions) - len(table))

    def can_grow(self, table: list[int], num_positions: int) -> bool:
        return self.missing(table, num_positions) <= len(self._free)

    def room(self, table: list[int]) -> int:
        """Most positions `table` could hold if it took every free block."""
        return (len(table) + len(self._free)) * self.block_size

    def grow(self, table: list[int], num_positions: int) -> None:
        """Append blocks to `table` until it holds `num_positions` positions; raises if too few are free."""
        missing = self.missing(table, num_positions)
        if missing > len(self._free):
            raise MemoryError(f"{missing} KV blocks needed, {len(self._free)} free")
        for _ in range(missing):
            block = self._free.popleft()
            self._used.add(block)
            table.append(block)

    def release(self, table: list[int]) -> None:
        """Give back every block of `table` and empty it."""
        for block in reversed(table):
            if block not in self._used:
                raise ValueError(f"block {block} is not allocated")
            self._used.remove(block)
            self._free.appendleft(block)
        table.clear()
