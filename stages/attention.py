"""Attention over the slot KV cache for a batch that mixes prefill chunks and decodes.

The tokens of one step are flattened: sequence i contributes `query_lens[i]`
consecutive tokens at positions `start_positions[i]...`. Keys and values of the
new tokens are written into each sequence's slot, then every token attends to
its own sequence's cached prefix. Decodes (one token each) run as one batched
call; prefill chunks run one per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class AttentionBatch:
    """Where the flattened tokens of a step belong."""

    slots: torch.Tensor
    """[B] cache slot of each sequence."""
    start_positions: torch.Tensor
    """[B] position of each sequence's first token in this step."""
    query_lens: list[int]
    """Tokens of each sequence in this step."""
    token_slots: torch.Tensor
    """[T] slot of each token."""
    token_positions: torch.Tensor
    """[T] position of each token."""

    @classmethod
    def build(cls, slots: list[int], start_positions: list[int], query_lens: list[int]) -> AttentionBatch:
        lens = torch.tensor(query_lens)
        starts = torch.tensor(start_positions)
        token_slots = torch.repeat_interleave(torch.tensor(slots), lens)
        first_token = torch.cumsum(lens, 0) - lens  # index of each sequence's first token in the step
        within = torch.arange(int(lens.sum())) - torch.repeat_interleave(first_token, lens)
        token_positions = torch.repeat_interleave(starts, lens) + within
        return cls(torch.tensor(slots), starts, list(query_lens), token_slots, token_positions)

    @property
    def context_lens(self) -> torch.Tensor:
        """[B] positions each sequence attends to after this step's tokens are written."""
        return self.start_positions + torch.tensor(self.query_lens)


def slot_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, batch: AttentionBatch
) -> torch.Tensor:
    """q [T, Hq, D], k/v [T, Hkv, D]; cache_k/v [slots, Hkv, L, D] of one layer. Returns [T, Hq, D]."""
    cache_k[batch.token_slots, :, batch.token_positions] = k
    cache_v[batch.token_slots, :, batch.token_positions] = v
    gqa = q.shape[1] != k.shape[1]
    out = torch.empty_like(q)
    context = batch.context_lens.tolist()
    offsets = [0]
    for n in batch.query_lens:
        offsets.append(offsets[-1] + n)
    decode_rows = [i for i, n in enumerate(batch.query_lens) if n == 1]
    if decode_rows:
        rows = torch.tensor(decode_rows)
        token_index = torch.tensor([offsets[i] for i in decode_rows])
        length = max(context[i] for i in decode_rows)
        keys = cache_k[batch.slots[rows], :, :length]  # [B, Hkv, Lmax, D]
        values = cache_v[batch.slots[rows], :, :length]
        lens = batch.context_lens[rows]
        mask = torch.arange(length)[None, :] < lens[:, None]  # [B, Lmax]
        attended = F.scaled_dot_product_attention(
            q[token_index].unsqueeze(2), keys, values, attn_mask=mask[:, None, None, :], enable_gqa=gqa
        )  # [B, Hq, 1, D]
        out[token_index] = attended.squeeze(2)
    for i, n in enumerate(batch.query_lens):
        if n == 1:
            continue
        start, end = offsets[i], offsets[i + 1]
        slot, ctx = int(batch.slots[i]), context[i]
        keys = cache_k[slot, :, :ctx].unsqueeze(0)
        values = cache_v[slot, :, :ctx].unsqueeze(0)
        first = ctx - n
        mask = torch.arange(ctx)[None, :] <= (first + torch.arange(n))[:, None]  # causal, offset by the prefix
        attended = F.scaled_dot_product_attention(
            q[start:end].transpose(0, 1).unsqueeze(0), keys, values, attn_mask=mask[None, None], enable_gqa=gqa
        )  # [1, Hq, n, D]
        out[start:end] = attended[0].transpose(0, 1)
    return out


def cached_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache, layer: int, batch: AttentionBatch) -> torch.Tensor:
    """The one entry point a family's attention layer calls: q [T, Hq, D], k/v [T, Hkv, D] of this step's tokens,
    written into `cache` at `layer` and attended over each sequence's cached prefix. Returns [T, Hq, D].

    Families never index the cache themselves, so the cache's memory layout (slots today) can change without them.
    """
    return slot_attention(q, k, v, cache.k[layer], cache.v[layer], batch)
