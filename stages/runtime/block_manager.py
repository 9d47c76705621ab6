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


@dataclass(frozen=True)
class StateShape:
    """Per-sequence recurrent state of a model's linear-attention layers (Gated DeltaNet): fixed-size, whatever the
    sequence's length, so each sequence holds one slot of it rather than blocks."""

    num_layers: int
    """Linear-attention layers (the full-attention layers keep the KV cache)."""
    conv_channels: int
    """Channels of the short causal convolution before the recurrence (q, k and v together)."""
    conv_width: int
    """Inputs of the convolution's past it keeps: kernel size - 1."""
    num_heads: int
    key_dim: int
    value_dim: int

    def bytes_per_sequence(self, element_size: int) -> int:
        """Conv state in the model's dtype plus the recurrent state in float32, over every linear layer."""
        conv = self.conv_channels * self.conv_width * element_size
        recurrent = self.num_heads * self.key_dim * self.value_dim * 4
        return self.num_layers * (conv + recurrent)


class SlotManager:
    """Which recurrent-state slots are free; a sequence takes one on admission and gives it back when it finishes,
    is cancelled or is preempted (a preempted sequence is recomputed from position 0 into a fresh slot)."""

    def __init__(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError("num_slots must be >= 1")
        self.num_slots = num_slots
        self._free: deque[int] = deque(range(num_slots))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def take(self) -> int:
        if not self._free:
            raise MemoryError(f"all {self.num_slots} recurrent-state slots are in use")
        return self._free.popleft()

    def give(self, slot: int) -> None:
        if slot in self._free or not 0 <= slot < self.num_slots:
            raise ValueError(f"state slot {slot} is not allocated")
        self._free.appendleft(slot)
