"""Drama 3's codebook-MTP decoder. No CPU oracle exists (the reference server's tower needs its CUDA kernels), so:

- a plain-torch reading of the published layout, written here straight from the checkpoint's tensors (fused
  [query | gate | key | value] projection, pairwise-interleaved RoPE, zero-centred norms, no cache: every row
  attends over the whole causal prefix at once), against the served tower, which splits and permutes those tensors
  and keeps a per-sequence cache: each head's logits at each row, teacher-forced;
- self-consistency: a sequence's logits do not depend on the sequences decoded beside it (batch invariance) nor on
  how its prompt rows were cut into prefill chunks.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.tiny_drama3.build import DECODER, SEMANTIC_START, decoder_tensors
from tests.tolerance import rounding_bound, traced
from vocalis.stages.layers.weights import load_strict, take
from vocalis.stages.models.drama3.config import parse_decoder_config
from vocalis.stages.models.drama3.tower import CodebookTower, RowGroup
from vocalis.stages.models.drama3.weights import tower_weights

K, V, D = DECODER["num_codebooks"], DECODER["vocab_size"], DECODER["dim"]
EOS = 5


@pytest.fixture(scope="module")
def published():
    return decoder_tensors(torch.Generator().manual_seed(3))


@pytest.fixture(scope="module")
def tower(published):
    config = parse_decoder_config(DECODER, D)
    module = CodebookTower(config, SEMANTIC_START, SEMANTIC_START + V - 1)
    return load_strict(module, take(tower_weights(published, config), "tower."), "tiny tower").eval()


def frames(length: int, seed: int) -> torch.Tensor:
    """Rows [length, 1 + K]: a few text rows (zeros beside them), then semantic frames."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, V, (length, K), generator=g)
    rows = torch.cat([codes[:, :1] + SEMANTIC_START, codes], dim=1)
    rows[:3] = 0
    rows[:3, 0] = torch.randint(0, 300, (3,), generator=g)
    return rows


def gemma_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + DECODER["norm_eps"]) * (1 + weight)


def interleaved_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    rotary = int(DECODER["head_dim"] * DECODER["rotary_percent"])
    inv = DECODER["rope_base"] ** -(torch.arange(0, rotary, 2).float() / rotary)
    angle = positions[:, None, None].float() * inv
    even, odd = x[..., :rotary:2], x[..., 1:rotary:2]
    turned = torch.stack([even * angle.cos() - odd * angle.sin(), odd * angle.cos() + even * angle.sin()], -1).flatten(-2)
    return torch.cat([turned, x[..., rotary:]], -1)


def reference_logits(t: dict[str, torch.Tensor], hidden: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """[T - 1, K - 1, V]: each head's logits at rows 0..T-2, row p predicting frame p + 1."""
    heads, kv, hd = DECODER["n_head"], DECODER["n_local_heads"], DECODER["head_dim"]
    inputs, nexts = rows[:-1], rows[1:]
    n = len(inputs)
    positions = torch.arange(n)
    semantic = ((nexts[:, 0] >= SEMANTIC_START) & (nexts[:, 0] < SEMANTIC_START + V))[:, None]
    own_semantic = ((inputs[:, 0] >= SEMANTIC_START) & (inputs[:, 0] < SEMANTIC_START + V))[:, None]
    table = t["audio_decoder.codebook_embeddings.weight"]
    extra = sum(table[c * V + inputs[:, 1 + c]] for c in range(1, K)) * own_semantic

    def layer(p: str, embedding: str, x: torch.Tensor, code: torch.Tensor, add: torch.Tensor | float) -> torch.Tensor:
        emb = t[p + embedding][code] * semantic + add
        mixed = F.linear(torch.cat([gemma_norm(emb, t[p + "enorm.weight"]), gemma_norm(x, t[p + "hnorm.weight"])], -1),
                         t[p + "eh_proj.weight"])
        a = "transformer_layer.attention."
        q, g, k, v = F.linear(gemma_norm(mixed, t[p + "transformer_layer.attention_norm.weight"]), t[p + a + "wqkv.weight"]).split(
            [heads * hd, heads * hd, kv * hd, kv * hd], -1)
        q = interleaved_rope(gemma_norm(q.view(n, heads, hd), t[p + a + "q_norm.weight"]), positions)
        k = interleaved_rope(gemma_norm(k.view(n, kv, hd), t[p + a + "k_norm.weight"]), positions)
        k, v = k.repeat_interleave(heads // kv, 1), v.view(n, kv, hd).repeat_interleave(heads // kv, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, -1) * torch.sigmoid(g)
        r = mixed + F.linear(out, t[p + a + "wo.weight"])
        f = gemma_norm(r, t[p + "transformer_layer.ffn_norm.weight"])
        ff = "transformer_layer.feed_forward."
        f = F.linear(F.silu(F.linear(f, t[p + ff + "w1.weight"])) * F.linear(f, t[p + ff + "w3.weight"]), t[p + ff + "w2.weight"])
        return gemma_norm(r + f, t[p + "final_layernorm.weight"])

    x = hidden[:n]
    for i in range(DECODER["shared_enrichment_layers"]):
        x = layer(f"audio_decoder_mtp_shared.layers.{i}.", "semantic_embedding.weight", x, nexts[:, 1], extra if i == 0 else 0.0)
    logits = []
    for j in range(K - 1):
        x = layer(f"audio_decoder_mtp.layers.{j}.", "codebook_embedding.weight", x, nexts[:, 1 + j], 0.0)
        logits.append(F.linear(x, t[f"audio_decoder_mtp.heads.{j}.weight"]))
    return torch.stack(logits, 1)


def served_logits(tower: CodebookTower, sequences: list[tuple[torch.Tensor, torch.Tensor]], chunks: list[int] | None = None
                  ) -> list[torch.Tensor]:
    """Each sequence's head logits [K - 1, V] at its last input row, teacher-forced: its rows but the last two are
    prefilled (in `chunks`, each sequence alone), then every sequence decodes its row T-2 in one batched call."""
    caches = [tower.new_cache(torch.float32, "cpu") for _ in sequences]
    for (hidden, rows), kv in zip(sequences, caches, strict=True):
        sizes, start = chunks or [len(rows) - 2], 0
        for size in sizes:
            span = slice(start, start + size)
            tower.run(hidden[span], torch.arange(start, start + size), rows[span], rows[start + 1 : start + size + 1, 0],
                      [RowGroup(kv, start, size)], next_frames=rows[start + 1 : start + size + 1])
            start += size
    lasts = [len(rows) - 2 for _, rows in sequences]
    recorded: list[torch.Tensor] = []
    forced = torch.stack([rows[-1] for _, rows in sequences])

    def choose(j: int, logits: torch.Tensor) -> torch.Tensor:
        recorded.append(logits)
        return forced[:, 2 + j]

    tower.run(torch.stack([h[p] for (h, _), p in zip(sequences, lasts, strict=True)]), torch.tensor(lasts),
              torch.stack([r[p] for (_, r), p in zip(sequences, lasts, strict=True)]), forced[:, 0],
              [RowGroup(kv, p, 1) for kv, p in zip(caches, lasts, strict=True)], choose=choose)
    return list(torch.stack(recorded, 1))


def sequence(length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(length, D, generator=torch.Generator().manual_seed(seed)), frames(length, seed)


def test_served_tower_matches_a_plain_reading_of_the_published_tensors(tower, published):
    hidden, rows = sequence(12, 1)
    with torch.no_grad():
        with traced() as path:
            expected = reference_logits(published, hidden, rows)
        for last in (4, 11):  # a text row predicting the first audio frame... and a late audio row
            got = served_logits(tower, [(hidden[: last + 1], rows[: last + 1])])[0]
            torch.testing.assert_close(got, expected[last - 1], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_logits_do_not_depend_on_the_batch_or_on_prefill_chunks(tower):
    a, b, c = sequence(13, 2), sequence(7, 3), sequence(10, 4)
    with torch.no_grad():
        with traced() as path:
            alone = served_logits(tower, [a])[0]
        together = served_logits(tower, [b, a, c])
        chunked = served_logits(tower, [a], chunks=[1, 6, 4])[0]
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    torch.testing.assert_close(together[1], alone, atol=tolerance, rtol=0)  # float32 GEMMs of other shapes
    torch.testing.assert_close(chunked, alone, atol=tolerance, rtol=0)
    assert not torch.allclose(together[0], alone[: len(together[0])], atol=max(1e-3, tolerance))


def test_a_non_semantic_next_frame_zeroes_the_code_embeddings(tower):
    """An end-of-speech label still runs every layer, with its code embeddings masked: any codes give the same."""
    hidden, rows = sequence(9, 5)
    rows[-1, 0] = EOS
    other = rows.clone()
    other[-1, 1:] = (other[-1, 1:] + 7) % V
    with torch.no_grad():
        first = served_logits(tower, [(hidden, rows)])[0]
        second = served_logits(tower, [(hidden, other)])[0]
    torch.testing.assert_close(first, second)
