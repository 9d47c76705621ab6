"""The KV-cache budget and the paged attention against plain causal attention."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from tests.tolerance import rounding_bound, traced
from vocalis.stages.runtime.attention import cached_attention
from vocalis.stages.runtime.deploy import StageDeploy
from vocalis.stages.runtime.kv_cache import CacheShape, PagedKVCache, kv_cache_budget

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


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the RSS from /proc")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_cpu_budget_is_resident_only_as_blocks_are_used(dtype):
    """A 512 MiB budget costs address space at start, not resident memory; blocks read zero and keep what is written."""
    before = _rss_bytes()
    cache = PagedKVCache.from_budget(SHAPE, 512 << 20, block_size=16, dtype=dtype)
    assert cache.bytes > 500 << 20
    assert _rss_bytes() - before < 64 << 20
    block = cache.k[1, 7]
    assert block.dtype == dtype and not block.any() and not cache.v[0, cache.num_blocks - 1].any()
    cache.k[1, 7] = 1.5
    cache.v[0, 3, 2] = -2.0
    assert (cache.k[1, 7] == 1.5).all() and (cache.v[0, 3, 2] == -2.0).all() and not cache.v[0, 3, 1].any()
    assert cache.k.is_contiguous() and cache.k.shape == (2, cache.num_blocks, 16, 2, 8)


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
        with traced() as path:
            expected = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], is_causal=True, enable_gqa=True
            )[0].transpose(0, 1)[firsts[i] :]
        n = lengths[i] - firsts[i]
        torch.testing.assert_close(out[offset : offset + n], expected, atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
        offset += n


def test_kept_decode_context_equals_gathering_every_step():
    """Decode steps that continue the kept context (the new keys/values written into it, past its room and back to a
    gather) attend exactly as steps that gather every sequence's blocks from the cache."""
    torch.manual_seed(0)
    tables = [[5, 1, 9, 30, 2, 14, 15, 16, 17, 18, 19, 22], [7, 3, 11, 12, 23, 24, 25, 26, 27, 28], [0, 20, 21, 4, 6, 8, 10, 13, 29, 31]]
    prompts = [9, 3, 6]
    kept_cache, gathering = PagedKVCache(SHAPE, num_blocks=48, block_size=4), PagedKVCache(SHAPE, num_blocks=48, block_size=4)
    gathering.decode_context = None  # every layer gathers from the blocks, as a GPU cache does
    kept_cache.decode_context.headroom_blocks = 2
    with torch.inference_mode():
        for table, n in zip(tables, prompts, strict=True):
            q, k, v = torch.randn(n, 4, 8), torch.randn(n, 2, 8), torch.randn(n, 2, 8)
            for cache in (kept_cache, gathering):
                for layer in range(SHAPE.num_layers):
                    cached_attention(q, k, v, cache, layer, cache.batch([table], [0], [n]))
        for step in range(30):  # the room (longest context + 2 blocks of 4) runs out twice on the way
            positions = [n + step for n in prompts]
            q, k, v = torch.randn(3, 4, 8), torch.randn(3, 2, 8), torch.randn(3, 2, 8)
            kept = kept_cache.batch(tables, positions, [1, 1, 1], continues=step > 0)
            fresh = gathering.batch(tables, positions, [1, 1, 1])
            for layer in range(SHAPE.num_layers):
                assert torch.equal(cached_attention(q, k, v, kept_cache, layer, kept),
                                   cached_attention(q, k, v, gathering, layer, fresh))
    assert kept_cache.decode_context.gathers == 3  # the first step, then contexts of 21 and 33 positions


def test_a_context_too_large_to_keep_is_gathered_per_layer():
    """The kept contexts stay within their share of the cache's bytes: a decode step whose padded contexts would not fit
    is not kept (every layer gathers, as a GPU cache does) and attends the same."""
    torch.manual_seed(1)
    tables = [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    small, gathering = PagedKVCache(SHAPE, num_blocks=16, block_size=4), PagedKVCache(SHAPE, num_blocks=16, block_size=4)
    gathering.decode_context = None
    context = small.decode_context
    per_position = 2 * SHAPE.num_layers * SHAPE.num_kv_heads * SHAPE.head_dim * 4
    context.max_bytes = 2 * 12 * per_position  # two rows of 12 positions: room for contexts up to 3 blocks, no more
    with torch.inference_mode():
        for table in tables:
            q, k, v = torch.randn(9, 4, 8), torch.randn(9, 2, 8), torch.randn(9, 2, 8)
            for cache in (small, gathering):
                for layer in range(SHAPE.num_layers):
                    cached_attention(q, k, v, cache, layer, cache.batch([table], [0], [9]))
        kept_steps = []
        for step in range(8):  # contexts of 10..17 positions: kept while they fit in 3 blocks, then not
            q, k, v = torch.randn(2, 4, 8), torch.randn(2, 2, 8), torch.randn(2, 2, 8)
            kept = small.batch(tables, [9 + step, 9 + step], [1, 1], continues=step > 0)
            fresh = gathering.batch(tables, [9 + step, 9 + step], [1, 1])
            kept_steps.append(kept.decode is not None)
            for layer in range(SHAPE.num_layers):
                assert torch.equal(cached_attention(q, k, v, small, layer, kept),
                                   cached_attention(q, k, v, gathering, layer, fresh))
    assert kept_steps == [True, True, True, False, False, False, False, False]
    assert context._storage is None  # the buffers are let go once a step no longer fits
