"""The KV-cache budget and the paged attention against plain causal attention."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from vocalis.stages.attention import cached_attention
from vocalis.stages.deploy import StageDeploy
from vocalis.stages.kv_cache import CacheShape, PagedKVCache, kv_cache_budget

SHAPE = CacheShape(num_layers=2, num_kv_heads=2, head_dim=8, max_len=256)  # 256 bytes a position in float32, 128 in bfloat16


def test_budget_from_bytes_fraction_or_worst_case():
    assert kv_cache_budget(SHAPE, torch.float32, "cpu", 16, kv_cache_bytes=1 << 20) == 1 << 20
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert kv_cache_budget(SHAPE, torch.float32, "cpu", 16, kv_cache_fraction=0.01) == int(physical * 0.01)
    assert kv_cache_budget(SHAPE, torch.bfloat16, "cpu", 16) == 16 * 256 * 128  # room for max_num_seqs x max_len
    cache = PagedKVCache.from_budget(SHAPE, 10_000, block_size=16)  # 4096 bytes a block: 2 blocks
    assert (cache.num_blocks, cache.bytes) == (2, 8192)
    with pytest.raises(ValueError, match="raise kv_cache_bytes"):
        PagedKVCache.from_budget(SHAPE, 1000, block_size=16)
    options = StageDeploy(name="talker", kv_cache_bytes=4096, kv_block_size=8).kv_cache_options()
    assert options == {"kv_cache_bytes": 4096, "kv_cache_fraction": 0.0, "block_size": 8}


def test_paged_attention_equals_causal_attention_for_a_mixed_step():
    """Three sequences with scattered blocks: one prefill from 0, one prefill chunk after a cached prefix, one decode."""
    torch.manual_seed(0)
    cache = PagedKVCache(SHAPE, num_blocks=32, block_size=4)
    tables = [[5, 1, 9, 30, 2], [7, 3, 11, 12], [0, 20, 21]]
    lengths = [17, 14, 9]  # final context of each sequence
    firsts = [0, 10, 8]  # positions already cached before the step
    hq = 4
    full = [(torch.randn(n, hq, 8), torch.randn(n, 2, 8), torch.randn(n, 2, 8)) for n in lengths]
    with torch.inference_mode():
        for i in (1, 2):  # cache the prefixes first, one sequence at a time
            q, k, v = (t[: firsts[i]] for t in full[i])
            cached_attention(q, k, v, cache, 0, cache.batch([tables[i]], [0], [firsts[i]]))
        step = [tuple(t[firsts[i] :] for t in full[i]) for i in range(3)]
        batch = cache.batch(tables, firsts, [lengths[i] - firsts[i] for i in range(3)])
        out = cached_attention(*(torch.cat([s[j] for s in step]) for j in range(3)), cache, 0, batch)
    offset = 0
    for i, (q, k, v) in enumerate(full):
        expected = F.scaled_dot_product_attention(
            q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], is_causal=True, enable_gqa=True
        )[0].transpose(0, 1)[firsts[i] :]
        n = lengths[i] - firsts[i]
        torch.testing.assert_close(out[offset : offset + n], expected, atol=1e-5, rtol=0)
        offset += n
