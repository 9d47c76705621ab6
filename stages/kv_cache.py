"""KV-cache memory: a fixed number of preallocated slots, one per running sequence.

A slot holds a sequence's keys and values for every layer up to `max_len`
positions. The bookkeeping (SlotAllocator) has no tensors, so the scheduler can
be tested without torch; SlotKVCache owns the memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class SlotAllocator:
    """Which slots are free. Allocation is O(1); a freed slot is reused first."""

    def __init__(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError("num_slots must be >= 1")
        self.num_slots = num_slots
        self._free = list(range(num_slots - 1, -1, -1))
        self._used: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self) -> int | None:
        if not self._free:
            return None
        slot = self._free.pop()
        self._used.add(slot)
        return slot

    def free(self, slot: int) -> None:
        if slot not in self._used:
            raise ValueError(f"slot {slot} is not allocated")
        self._used.remove(slot)
        self._free.append(slot)


@dataclass(frozen=True)
class CacheShape:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    max_len: int
    """Most positions (prompt + generated) one sequence may hold."""


class SlotKVCache:
    """Keys and values for `num_slots` sequences, allocated once at start-up."""

    def __init__(self, shape: CacheShape, num_slots: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> None:
        self.shape = shape
        self.allocator = SlotAllocator(num_slots)
        size = (shape.num_layers, num_slots, shape.num_kv_heads, shape.max_len, shape.head_dim)
        self.k = torch.zeros(size, dtype=dtype, device=device)
        self.v = torch.zeros(size, dtype=dtype, device=device)

    @property
    def num_free(self) -> int:
        return self.allocator.num_free

    @property
    def bytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()
