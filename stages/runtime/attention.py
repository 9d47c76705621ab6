"""Attention over the paged KV cache for a batch that mixes prefill chunks and decodes.

The tokens of one step are flattened: sequence i contributes `query_lens[i]`
consecutive tokens at positions `start_positions[i]...`. Keys and values of the
new tokens are written into the sequences' blocks (one scatter through the slot
mapping), then every token attends to its own sequence's cached prefix, read
through the block tables. Two batched calls cover any mix: one for all decodes
(one token each) and one for all prefill chunks (padded to the longest chunk);
no Python loop over sequences. Every index tensor is built once per step on the
cache's device.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vocalis.stages.runtime.decode_context import DecodeStep
from vocalis.stages.runtime.linear_attention import RecurrentBatch


@dataclass
class AttentionGroup:
    """Sequences attended in one batched call: their queries padded to `query_len`, keys to `context_len`."""

    block_tables: torch.Tensor
    """[G, blocks] each sequence's blocks covering `context_len` (padded with block 0, masked off)."""
    query_index: torch.Tensor
    """[G, Q] step token of each padded query (padding repeats a real token; its output is dropped)."""
    query_positions: torch.Tensor
    """[G, Q] position of each padded query."""
    context_lens: torch.Tensor
    """[G] positions each sequence attends to."""
    context_len: int
    out_tokens: torch.Tensor
    """[n] step tokens whose output this group produces ..."""
    out_index: torch.Tensor
    """[n] ... taken from these indices of the flattened [G * Q] padded output."""
    mask: torch.Tensor
    """[G, 1, Q, context_len] which cached positions each padded query attends to (causal, within its sequence);
    built once per step, shared by every layer."""
    whole: bool = False
    """The group is every token of the step, in order, unpadded: no gather or scatter needed."""
    _additive: torch.Tensor | None = None

    def attention_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """`mask` for scaled_dot_product_attention. On CPU the additive form (0 or -inf, in the queries' dtype),
        made once per step rather than converted from the bool mask by every layer: the same values either way."""
        if self.mask.device.type != "cpu":
            return self.mask
        if self._additive is None or self._additive.dtype != dtype:
            self._additive = torch.zeros(self.mask.shape, dtype=dtype, device=self.mask.device).masked_fill_(~self.mask, float("-inf"))
        return self._additive


@dataclass
class AttentionBatch:
    """Where the flattened tokens of a step belong, and how they attend."""

    token_positions: torch.Tensor
    """[T] position of each token."""
    slot_mapping: torch.Tensor
    """[T] flat cache index (block * block_size + offset) each token's keys/values go to."""
    query_lens: list[int]
    """Tokens of each sequence in this step."""
    start_positions: list[int]
    groups: list[AttentionGroup]
    recurrent: RecurrentBatch | None = None
    """The step's rows and state slots, for a model with linear-attention layers (None otherwise)."""
    decode: DecodeStep | None = None
    """A decode-only step's context kept from the step before (decode_context.py); None: gathered by every layer."""

    @classmethod
    def build(
        cls,
        block_tables: list[list[int]],
        start_positions: list[int],
        query_lens: list[int],
        block_size: int,
        device: str | torch.device = "cpu",
        state_slots: list[int] | None = None,
    ) -> AttentionBatch:
        if all(n == 1 for n in query_lens):
            return cls._decodes(block_tables, start_positions, block_size, device, state_slots)
        positions: list[int] = []
        slots: list[int] = []
        firsts: list[int] = []
        for table, start, n in zip(block_tables, start_positions, query_lens, strict=True):
            if len(table) * block_size < start + n:
                raise ValueError(f"a block table of {len(table)} blocks cannot hold positions up to {start + n}")
            firsts.append(len(positions))
            for p in range(start, start + n):
                positions.append(p)
                slots.append(table[p // block_size] * block_size + p % block_size)
        decodes = [i for i, n in enumerate(query_lens) if n == 1]
        prefills = [i for i, n in enumerate(query_lens) if n > 1]
        groups = [
            _group(rows, block_tables, start_positions, query_lens, firsts, block_size, device) for rows in (decodes, prefills) if rows
        ]
        if len(groups) == 1 and (not prefills or len(prefills) == 1):
            groups[0].whole = True  # all decodes, or one prefill chunk alone
        return cls(
            torch.tensor(positions, dtype=torch.long, device=device),
            torch.tensor(slots, dtype=torch.long, device=device),
            list(query_lens),
            list(start_positions),
            groups,
            None if state_slots is None else RecurrentBatch.build(state_slots, query_lens, device),
        )


    @classmethod
    def _decodes(
        cls,
        block_tables: list[list[int]],
        start_positions: list[int],
        block_size: int,
        device: str | torch.device,
        state_slots: list[int] | None,
    ) -> AttentionBatch:
        """A step of decodes only (the steady state): every index the step needs is packed into one host list and
        crosses to the device in one copy; the mask is one comparison on the device."""
        rows = len(block_tables)
        context_len = max(start_positions) + 1
        width = -(-context_len // block_size)
        slots: list[int] = []
        tables: list[int] = []
        for table, p in zip(block_tables, start_positions, strict=True):
            if len(table) * block_size <= p:
                raise ValueError(f"a block table of {len(table)} blocks cannot hold positions up to {p + 1}")
            slots.append(table[p // block_size] * block_size + p % block_size)
            tables.extend(table[:width])
            tables.extend([0] * (width - min(len(table), width)))
        # array -> frombuffer: a fifth of torch.tensor's time on a list of ints (which grows with batch x width)
        packed = torch.frombuffer(
            array("q", [*start_positions, *slots, *range(rows), *tables, *(state_slots or ())]), dtype=torch.long
        ).to(device)
        positions, slot_mapping, order = packed[:rows], packed[rows : 2 * rows], packed[2 * rows : 3 * rows]
        table_end = 3 * rows + rows * width
        key_positions = torch.arange(context_len, device=device)
        # one query per sequence at its own position: key <= position is both the causal and the length bound
        mask = key_positions[None, None, None, :] <= positions[:, None, None, None]
        group = AttentionGroup(
            block_tables=packed[3 * rows : table_end].view(rows, width),
            query_index=order.view(rows, 1),
            query_positions=positions.view(rows, 1),
            context_lens=positions + 1,
            context_len=context_len,
            out_tokens=order,
            out_index=order,
            mask=mask,
            whole=True,
        )
        recurrent = None if state_slots is None else RecurrentBatch.decodes(packed[table_end:], order)
        return cls(positions, slot_mapping, [1] * rows, list(start_positions), [group], recurrent)


def _group(
    rows: list[int],
    block_tables: list[list[int]],
    starts: list[int],
    lens: list[int],
    firsts: list[int],
    block_size: int,
    device: str | torch.device,
) -> AttentionGroup:
    contexts = [starts[i] + lens[i] for i in rows]
    context_len = max(contexts)
    width = -(-context_len // block_size)
    query_len = max(lens[i] for i in rows)
    tables, index, qpos, out_tokens, out_index = [], [], [], [], []
    for g, i in enumerate(rows):
        table = block_tables[i][:width]
        tables.append(table + [0] * (width - len(table)))
        for j in range(query_len):
            real = j < lens[i]
            index.append(firsts[i] + (j if real else 0))
            qpos.append(starts[i] + j)
            if real:
                out_tokens.append(firsts[i] + j)
                out_index.append(g * query_len + j)

    def tensor(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.long, device=device)

    query_positions = tensor(qpos).view(len(rows), query_len)
    context_lens = tensor(contexts)
    key_positions = torch.arange(context_len, device=device)
    mask = (key_positions[None, None, :] <= query_positions[:, :, None]) & (key_positions[None, None, :] < context_lens[:, None, None])
    return AttentionGroup(
        block_tables=tensor(tables).view(len(rows), width),
        query_index=tensor(index).view(len(rows), query_len),
        query_positions=query_positions,
        context_lens=context_lens,
        context_len=context_len,
        out_tokens=tensor(out_tokens),
        out_index=tensor(out_index),
        mask=mask[:, None],
    )


def paged_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, batch: AttentionBatch,
    gather: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None = None,
    kept: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> torch.Tensor:
    """q [T, Hq, D], k/v [T, Hkv, D]; cache_k/v [blocks, block_size, Hkv, D] of one layer. Returns [T, Hq, D].

    `gather(blocks)`: reusable destinations [blocks, block_size, Hkv, D] for the gathered keys and values (a fresh
    multi-megabyte tensor per layer and step costs as much as the copy itself on a CPU); None: new tensors.
    `kept(k, v)`: for a decode-only step (one whole group), the layer's keys and values [G, >= context_len, Hkv, D]
    of each sequence, this step's included, kept from step to step (decode_context.py) instead of gathered."""
    num_blocks, block_size, kv_heads, head_dim = cache_k.shape
    cache_k.view(-1, kv_heads, head_dim).index_copy_(0, batch.slot_mapping, k.to(cache_k.dtype))
    cache_v.view(-1, kv_heads, head_dim).index_copy_(0, batch.slot_mapping, v.to(cache_v.dtype))
    gqa = q.shape[1] != kv_heads
    out = None if len(batch.groups) == 1 and batch.groups[0].whole else torch.empty_like(q)
    for group in batch.groups:  # at most two: the decodes, the prefill chunks
        g, width = group.block_tables.shape
        length = group.context_len
        if kept is not None:
            context_k, context_v = kept(k, v)
        else:
            # index_select on the flattened table: one gather per tensor, several times faster than advanced indexing
            flat = group.block_tables.view(-1)
            if gather is None:
                gathered_k, gathered_v = cache_k.index_select(0, flat), cache_v.index_select(0, flat)
            else:
                gathered_k, gathered_v = gather(flat.shape[0])
                torch.index_select(cache_k, 0, flat, out=gathered_k)
                torch.index_select(cache_v, 0, flat, out=gathered_v)
            context_k = gathered_k.view(g, width * block_size, kv_heads, head_dim)
            context_v = gathered_v.view(g, width * block_size, kv_heads, head_dim)
        keys, values = context_k[:, :length].transpose(1, 2), context_v[:, :length].transpose(1, 2)
        queries = q.view(g, -1, *q.shape[1:]) if group.whole else q[group.query_index]  # [G, Q, Hq, D]
        attended = F.scaled_dot_product_attention(
            queries.transpose(1, 2), keys.to(q.dtype), values.to(q.dtype), attn_mask=group.attention_mask(q.dtype),
            enable_gqa=gqa,
        ).transpose(1, 2)  # [G, Q, Hq, D]
        if out is None:
            return attended.reshape(q.shape)
        out[group.out_tokens] = attended.reshape(-1, q.shape[1], q.shape[2])[group.out_index]
    assert out is not None
    return out


def cached_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache, layer: int, batch: AttentionBatch) -> torch.Tensor:
    """The one entry point a family's attention layer calls: q [T, Hq, D], k/v [T, Hkv, D] of this step's tokens,
    written into `cache` at `layer` and attended over each sequence's cached prefix. Returns [T, Hq, D].

    Families never index the cache themselves, so the cache's memory layout (paged blocks) can change without them.
    """
    step = batch.decode
    kept = None
    if step is not None and step.context is getattr(cache, "decode_context", None):
        kept = lambda k, v: step.context.keys_values(step, layer, k, v)  # noqa: E731
    return paged_attention(q, k, v, cache.k[layer], cache.v[layer], batch, getattr(cache, "gather_buffers", None), kept)
