"""The Qwen3.5 hybrid decoder (Gated DeltaNet + gated full attention) against transformers' `qwen3_5` torch fallback.

Goldens: tests/goldens/qwen3_5/make_goldens.py (tiny random weights under their published names, run in the
reference venv). Dense rows, a cached prefill then per-token decodes (the recurrent path), and a prefill in uneven
chunks carried over in the runtime's recurrent states must all match the reference's hidden states.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.components.hybrid import HybridConfig, HybridDecoder
from vocalis.stages.layers.gated_deltanet import GatedDeltaNet
from vocalis.stages.layers.weights import load_strict, take
from vocalis.stages.runtime.block_manager import CacheShape
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.linear_attention import RecurrentStates, gated_delta_chunked, gated_delta_step

GOLDENS = Path(__file__).resolve().parents[2] / "goldens" / "qwen3_5"


@pytest.fixture(scope="module")
def golden():
    tensors = load_file(str(GOLDENS / "goldens.safetensors"))
    config = HybridConfig.from_dict(json.loads((GOLDENS / "config.json").read_text()))
    decoder = load_strict(HybridDecoder(config), take(tensors, "model."), "tiny qwen3_5").eval()
    return decoder, tensors


def run_cached(decoder: HybridDecoder, ids: torch.Tensor, chunks: list[int]) -> torch.Tensor:
    """Hidden states of `ids` fed through the runtime caches in consecutive chunks of the given sizes."""
    cache = PagedKVCache(decoder.cache_shape(256), num_blocks=40, block_size=8)
    cache.states = RecurrentStates(decoder.state_shape(), num_slots=3)
    table = list(range(cache.blocks.blocks_for(len(ids))))
    cache.states.reset(torch.tensor([2]))
    outs, start = [], 0
    for n in chunks:
        batch = cache.batch([table], [start], [n], state_slots=[2])
        outs.append(decoder.cached(decoder.embed_tokens(ids[start : start + n]), batch, cache))
        start += n
    assert start == len(ids)
    return torch.cat(outs)


def test_dense_rows_match_transformers(golden):
    decoder, tensors = golden
    with torch.no_grad(), traced() as path:
        hidden = decoder.dense(decoder.embed_tokens(tensors["golden.ids"])[None])[0]
    torch.testing.assert_close(hidden, tensors["golden.dense"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_cached_prefill_then_recurrent_decodes_match_transformers(golden):
    decoder, tensors = golden
    ids = tensors["golden.ids"]
    with torch.no_grad(), traced() as path:  # every step counted: the recurrent state chains them
        hidden = run_cached(decoder, ids, [140] + [1] * (len(ids) - 140))
    torch.testing.assert_close(hidden, tensors["golden.cached"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_prefill_in_uneven_chunks_carries_the_state(golden):
    decoder, tensors = golden
    ids = tensors["golden.ids"]
    with torch.no_grad(), traced() as path:
        hidden = run_cached(decoder, ids, [37, 64, 3, 1, 45])
    # the chunked and per-token forms round differently; this random model amplifies that to ~3e-4 of values up to 4
    torch.testing.assert_close(hidden, tensors["golden.dense"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_every_loaded_tensor_changes_the_output(golden):
    """A random projection of the hidden states has a non-zero gradient in every tensor (one backward pass)."""
    decoder, tensors = golden
    params = dict(decoder.named_parameters())
    for p in params.values():
        p.grad = None
    hidden = decoder.dense(decoder.embed_tokens(tensors["golden.ids"][:70])[None])
    (hidden * torch.randn(hidden.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
    dead = [name for name, p in params.items() if p.grad is None or p.grad.abs().max().item() == 0]
    for p in params.values():
        p.grad = None
    assert not dead, f"tensors that change no output: {dead}"


def test_chunked_delta_rule_equals_the_recurrence():
    torch.manual_seed(0)
    b, h, length, dk, dv = 2, 3, 70, 8, 5
    q, k = (torch.nn.functional.normalize(torch.randn(b, h, length, dk), dim=-1) for _ in range(2))
    v = torch.randn(b, h, length, dv)
    log_decay, beta = -torch.rand(b, h, length), torch.rand(b, h, length)
    state = torch.randn(b, h, dk, dv)
    with traced() as path:
        out, final = gated_delta_chunked(q, k, v, log_decay, beta, state, chunk=16)
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    step_state, steps = state, []
    for t in range(length):
        o, step_state = gated_delta_step(q[:, :, t], k[:, :, t], v[:, :, t], log_decay[:, :, t], beta[:, :, t], step_state)
        steps.append(o)
    torch.testing.assert_close(out, torch.stack(steps, dim=2), atol=tolerance, rtol=0)
    torch.testing.assert_close(final, step_state, atol=tolerance, rtol=0)


def test_padding_neither_writes_the_state_nor_changes_earlier_outputs():
    layer = GatedDeltaNet(16, key_heads=1, value_heads=2, key_dim=4, value_dim=4, conv_kernel=4)
    states = RecurrentStates(layer.state_shape(1), num_slots=2)
    cache = PagedKVCache(CacheShape(1, 1, 4, 64), num_blocks=8, block_size=8)
    torch.manual_seed(3)
    short, long = torch.randn(3, 16), torch.randn(9, 16)
    with torch.no_grad(), traced() as path:
        together = layer.cached(torch.cat([short, long]), states, 0,
                                cache.batch([[0], [1, 2]], [0, 0], [3, 9], state_slots=[0, 1]).recurrent)
        conv, recurrent = states.conv[0, 0].clone(), states.recurrent[0, 0].clone()
        states.reset(torch.tensor([0]))
        alone = layer.cached(short, states, 0, cache.batch([[0]], [0], [3], state_slots=[0]).recurrent)
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)  # the rows batched or alone: other GEMM shapes
    torch.testing.assert_close(together[:3], alone, atol=tolerance, rtol=0)
    torch.testing.assert_close(states.conv[0, 0], conv, atol=tolerance, rtol=0)
    torch.testing.assert_close(states.recurrent[0, 0], recurrent, atol=tolerance, rtol=0)
