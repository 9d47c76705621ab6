"""The decode step of an autoregressive stage on static buffers, padded to a few batch sizes (CUDA graphs on a GPU).

A decode-only step (one token per sequence) is the steady state of every talker. Its shapes are made static: the
batch is padded up to the next captured size, and every block table to a width bucket (a power of two of blocks
covering the longest context, at most `max_len`'s), so a step attends over at most twice the keys it needs rather
than max_len's; the mask covers the bucket's keys. One graph per (size, bucket), captured on first use. Padding rows sit at position 0 of a scratch block that the runner
takes from the cache at start-up and no sequence ever holds, so their key/value writes touch nothing real; their
outputs are dropped. See graph_runner.py for the capture itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from vocalis.stages.runtime.attention import AttentionBatch, AttentionGroup
from vocalis.stages.runtime.graph_runner import Buffers, PaddedGraphRunner
from vocalis.stages.runtime.kv_cache import PagedKVCache

Forward = Callable[[torch.Tensor, AttentionBatch, PagedKVCache], torch.Tensor]


class DecodeGraphs:
    """`run(embeds [B, H], block_tables, positions)` -> hidden [B, H'] of a decode-only step, or None when the step
    does not fit (more sequences than the largest size): the stage then runs its eager path."""

    def __init__(
        self,
        forward: Forward,
        cache: PagedKVCache,
        sizes: Sequence[int],
        max_len: int,
        capture: bool | None = None,
    ) -> None:
        self.forward = forward
        self.cache = cache
        self.hidden_size = 0
        self.dtype = torch.float32
        """Width and dtype of the input embeddings, taken from the first step (the buffers of a size are made, and
        on CUDA captured, on its first use)."""
        block_size = cache.block_size
        self.max_width = -(-max_len // block_size)
        """Blocks of the widest bucket."""
        self.scratch: list[int] = []
        cache.blocks.grow(self.scratch, 1)  # held for good: padding rows write here
        self.sizes, self.capture = tuple(sizes), capture
        self.runners: dict[int, PaddedGraphRunner] = {}
        """One per width bucket (blocks per table), made on first use."""
        PaddedGraphRunner(sizes, self._inputs, self._body, cache.device, capture)  # checks the sizes and device now

    def bucket(self, blocks: int) -> int:
        """The width bucket holding `blocks` blocks: the next power of two, at most `max_width`."""
        return min(1 << max(0, blocks - 1).bit_length(), self.max_width)

    def runner(self, width: int) -> PaddedGraphRunner:
        runner = self.runners.get(width)
        if runner is None:
            runner = PaddedGraphRunner(self.sizes, lambda size: self._inputs(size, width), self._body, self.cache.device, self.capture)
            self.runners[width] = runner
        return runner

    @property
    def replays(self) -> int:
        return sum(r.replays for r in self.runners.values())

    @property
    def fallbacks(self) -> int:
        return sum(r.fallbacks for r in self.runners.values())

    def _inputs(self, size: int, width: int = 1) -> Buffers:
        scratch = self.scratch[0]
        meta = [0] * size + [scratch * self.cache.block_size] * size + [scratch] * (size * width)
        device = self.cache.device
        return {
            "embeds": torch.zeros(size, self.hidden_size, dtype=self.dtype, device=device),
            "meta": torch.tensor(meta, dtype=torch.long, device=device),
            "keys": torch.arange(width * self.cache.block_size, device=device),
        }

    def _body(self, inputs: Buffers) -> torch.Tensor:
        embeds, meta, keys = inputs["embeds"], inputs["meta"], inputs["keys"]
        size, width = embeds.shape[0], keys.shape[0] // self.cache.block_size
        positions, slot_mapping = meta[:size], meta[size : 2 * size]
        tables = meta[2 * size :].view(size, width)
        order = torch.arange(size, device=meta.device)
        mask = keys[None, None, None, :] <= positions[:, None, None, None]
        group = AttentionGroup(
            block_tables=tables, query_index=order.view(size, 1), query_positions=positions.view(size, 1),
            context_lens=positions + 1, context_len=keys.shape[0], out_tokens=order,
            out_index=order, mask=mask, whole=True,
        )
        batch = AttentionBatch(positions, slot_mapping, [1] * size, [0] * size, [group])
        return self.forward(embeds, batch, self.cache)

    def run(self, embeds: torch.Tensor, block_tables: list[list[int]], positions: list[int]) -> torch.Tensor | None:
        rows = len(positions)
        block_size = self.cache.block_size
        if not self.hidden_size:
            self.hidden_size, self.dtype = embeds.shape[1], embeds.dtype
        needed = max(positions) // block_size + 1
        if needed > self.max_width:
            return None
        width = self.bucket(needed)

        def fill(inputs: Buffers, rows: int) -> None:
            size = inputs["embeds"].shape[0]
            pad = size - rows
            scratch = self.scratch[0]
            slots = [table[p // block_size] * block_size + p % block_size for table, p in zip(block_tables, positions, strict=True)]
            tables: list[int] = []
            for table in block_tables:
                tables.extend(table[:width])
                tables.extend([scratch] * (width - min(len(table), width)))
            host = torch.tensor(
                [*positions, *[0] * pad, *slots, *[scratch * block_size] * pad, *tables, *[scratch] * (pad * width)],
                dtype=torch.long, device="cpu",
            )
            inputs["meta"].copy_(host, non_blocking=True)  # one host-to-device copy of every index
            inputs["embeds"][:rows].copy_(embeds)

        hidden = self.runner(width)(rows, fill)
        return None if hidden is None else hidden.clone()  # the static output is overwritten by the next step
