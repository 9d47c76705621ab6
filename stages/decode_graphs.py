"""The decode step of an autoregressive stage on static buffers, padded to a few batch sizes (CUDA graphs on a GPU).

A decode-only step (one token per sequence) is the steady state of every talker. Its shapes are made static: the
batch is padded up to the next captured size, every block table to the most blocks a sequence can hold
(`max_len`), and the mask covers that many keys. Padding rows sit at position 0 of a scratch block that the runner
takes from the cache at start-up and no sequence ever holds, so their key/value writes touch nothing real; their
outputs are dropped. See graph_runner.py for the capture itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from vocalis.stages.attention import AttentionBatch, AttentionGroup
from vocalis.stages.graph_runner import Buffers, PaddedGraphRunner
from vocalis.stages.kv_cache import PagedKVCache

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
        self.width = -(-max_len // block_size)
        """Blocks of every padded block table."""
        self.scratch: list[int] = []
        cache.blocks.grow(self.scratch, 1)  # held for good: padding rows write here
        self._key_positions = torch.arange(self.width * block_size, device=cache.device)
        self.runner = PaddedGraphRunner(sizes, self._inputs, self._body, cache.device, capture)

    def _inputs(self, size: int) -> Buffers:
        scratch = self.scratch[0]
        meta = [0] * size + [scratch * self.cache.block_size] * size + [scratch] * (size * self.width)
        return {
            "embeds": torch.zeros(size, self.hidden_size, dtype=self.dtype, device=self.cache.device),
            "meta": torch.tensor(meta, dtype=torch.long, device=self.cache.device),
        }

    def _body(self, inputs: Buffers) -> torch.Tensor:
        embeds, meta = inputs["embeds"], inputs["meta"]
        size = embeds.shape[0]
        positions, slot_mapping = meta[:size], meta[size : 2 * size]
        tables = meta[2 * size :].view(size, self.width)
        order = torch.arange(size, device=meta.device)
        mask = self._key_positions[None, None, None, :] <= positions[:, None, None, None]
        group = AttentionGroup(
            block_tables=tables, query_index=order.view(size, 1), query_positions=positions.view(size, 1),
            context_lens=positions + 1, context_len=self.width * self.cache.block_size, out_tokens=order,
            out_index=order, mask=mask, whole=True,
        )
        batch = AttentionBatch(positions, slot_mapping, [1] * size, [0] * size, [group])
        return self.forward(embeds, batch, self.cache)

    def run(self, embeds: torch.Tensor, block_tables: list[list[int]], positions: list[int]) -> torch.Tensor | None:
        rows = len(positions)
        block_size = self.cache.block_size
        if not self.hidden_size:
            self.hidden_size, self.dtype = embeds.shape[1], embeds.dtype
        if max(positions) >= self.width * block_size:
            return None

        def fill(inputs: Buffers, rows: int) -> None:
            size = inputs["embeds"].shape[0]
            pad = size - rows
            scratch = self.scratch[0]
            slots = [table[p // block_size] * block_size + p % block_size for table, p in zip(block_tables, positions, strict=True)]
            tables: list[int] = []
            for table in block_tables:
                tables.extend(table[: self.width])
                tables.extend([scratch] * (self.width - min(len(table), self.width)))
            host = torch.tensor(
                [*positions, *[0] * pad, *slots, *[scratch * block_size] * pad, *tables, *[scratch] * (pad * self.width)],
                dtype=torch.long,
            )
            inputs["meta"].copy_(host, non_blocking=True)  # one host-to-device copy of every index
            inputs["embeds"][:rows].copy_(embeds)

        hidden = self.runner(rows, fill)
        return None if hidden is None else hidden.clone()  # the static output is overwritten by the next step
