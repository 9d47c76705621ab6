"""Keys and values of a run of decode steps, kept gathered from one step to the next (CPU).

A decode step attends every sequence over its whole cached context. Read from the paged cache, that context is
gathered anew at every layer of every step (each sequence's blocks copied into one padded batch), a copy that grows
with the batch and with the context. While the same sequences decode step after step, in the same order, each
layer's gathered context only changes by one position per sequence: `DecodeContext` keeps it, per layer, in
buffers of a few blocks more than the longest context, and a continuing step writes just its new keys and values
there (beside the paged cache, which stays the record). Any other step (a new or finished sequence, a prefill,
a context past the buffers' room) gathers anew into them. The values attended are the same either way: only the
padding behind each sequence's context differs, and it is masked.

The buffers hold every layer's padded context at once, so they are memory beside the KV budget: they are kept only
while they fit in `max_bytes` (a share of the cache's own size); a step whose buffers would not fit gathers per layer
as before (a real-size talker with many long contexts on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class DecodeStep:
    """How one decode-only step reads its context (made by `DecodeContext.plan`, shared by every layer)."""

    context: DecodeContext
    fresh: bool
    """Gather each layer's context from the cache (True), or add this step's keys/values to what is kept."""
    tables: torch.Tensor
    """[G, room blocks] block tables padded to the buffers' room (read when `fresh`)."""
    write_index: torch.Tensor
    """[G] row * room + position: where each sequence's new key/value goes in a layer's flattened buffer."""


class DecodeContext:
    """Per layer, [G, room, Hkv, D] buffers of keys and of values, room a multiple of the block size."""

    headroom_blocks = 4
    """Blocks past the longest context when the buffers are (re)made: a continuing run gathers again after this many
    blocks' worth of steps (more would make every fresh gather copy more padding)."""

    def __init__(self, cache_k: torch.Tensor, cache_v: torch.Tensor, max_blocks: int, max_bytes: int) -> None:
        self.cache_k, self.cache_v = cache_k, cache_v
        self.max_blocks = max_blocks
        """Blocks of the longest possible context (max_len's): the room never exceeds it."""
        self.max_bytes = max_bytes
        """The most the buffers may take; a step that would need more is not kept (None from `plan`)."""
        self.rows = 0
        self.room_blocks = 0
        self._storage: torch.Tensor | None = None
        self._views: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        """Per layer: flat keys, flat values [G * room, Hkv, D] and the same as [G, room, Hkv, D], made when the
        buffers are (re)made, so a continuing step's layer makes no views of its own."""
        self._valid = False
        self.gathers = 0
        """Steps that gathered their context from the cache (the others continued the kept one)."""

    def invalidate(self) -> None:
        """What the buffers hold no longer continues into the next step (a prefill ran, or another path)."""
        self._valid = False

    def plan(self, block_tables: torch.Tensor, positions: torch.Tensor, order: torch.Tensor, context_len: int,
             continues: bool) -> DecodeStep | None:
        """The reads of a decode step over `block_tables` [G, width] at `positions` [G] (`order` is arange(G)).
        `continues`: the step's sequences are those of the last decode step, in order, each one position on.
        None: the step's context is too large to keep within `max_bytes` (every layer gathers its own)."""
        rows, width = block_tables.shape
        block_size = self.cache_k.shape[2]
        needed = -(-context_len // block_size)
        fresh = not (continues and self._valid and self.rows == rows and needed <= self.room_blocks)
        if fresh:
            room_blocks = min(needed + self.headroom_blocks, max(self.max_blocks, needed))
            if self._bytes(rows, room_blocks * block_size) > self.max_bytes:
                room_blocks = needed  # no headroom: gathers again sooner, but may still fit
            if self._bytes(rows, room_blocks * block_size) > self.max_bytes:
                self.invalidate()
                self._storage, self._views = None, []
                return None
            self.gathers += 1
            self.rows = rows
            self.room_blocks = room_blocks
            self._reserve(rows, self.room_blocks * block_size)
        self._valid = True
        room = self.room_blocks * block_size
        tables = F.pad(block_tables, (0, self.room_blocks - width)) if fresh else block_tables
        return DecodeStep(self, fresh, tables, order * room + positions)

    def _bytes(self, rows: int, room: int) -> int:
        layers, _, _, heads, dim = self.cache_k.shape
        return layers * 2 * rows * room * heads * dim * self.cache_k.element_size()

    def _reserve(self, rows: int, room: int) -> None:
        layers, _, _, heads, dim = self.cache_k.shape
        positions = rows * room
        if self._storage is None or self._storage.shape[2] < positions:
            self._storage = torch.empty((layers, 2, positions, heads, dim), dtype=self.cache_k.dtype, device=self.cache_k.device)
        self._views = []
        for layer in range(layers):
            keys, values = self._storage[layer, 0, :positions], self._storage[layer, 1, :positions]
            self._views.append((keys, values, keys.view(rows, room, heads, dim), values.view(rows, room, heads, dim)))

    def keys_values(self, step: DecodeStep, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer `layer`'s context [G, room, Hkv, D] of keys and of values, this step's k/v [G, Hkv, D] included
        (already written into the paged cache)."""
        keys, values, keys_rows, values_rows = self._views[layer]
        if step.fresh:
            block_size = self.cache_k.shape[2]
            flat = step.tables.view(-1)
            torch.index_select(self.cache_k[layer], 0, flat, out=keys.view(-1, block_size, *keys.shape[1:]))
            torch.index_select(self.cache_v[layer], 0, flat, out=values.view(-1, block_size, *values.shape[1:]))
        else:
            keys.index_copy_(0, step.write_index, k if k.dtype == keys.dtype else k.to(keys.dtype))
            values.index_copy_(0, step.write_index, v if v.dtype == values.dtype else v.to(values.dtype))
        return keys_rows, values_rows
