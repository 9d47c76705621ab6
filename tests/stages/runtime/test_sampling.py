"""Per-request sampling: greedy is exact, seeds reproduce, filters do what they say."""

from __future__ import annotations

import pytest
import torch

from vocalis.stages.runtime.sampling import (
    SamplerState,
    SamplingParams,
    SeenTokens,
    apply_repetition_penalty,
    mark_seen,
    penalize_rows,
    redraw_repeats,
    sample_batch,
    sample_rows,
    sample_states,
)


def test_greedy_is_argmax_whatever_the_batch():
    torch.manual_seed(0)
    logits = torch.randn(8, 50)
    states = [SamplerState(SamplingParams(temperature=0.0)) for _ in range(8)]
    assert torch.equal(sample_batch(logits, states), logits.argmax(-1))
    assert torch.equal(sample_batch(logits[3:4], states[3:4]), logits[3:4].argmax(-1))
    assert int(sample_batch(logits[:1], [SamplerState(SamplingParams(top_k=1))])) == int(logits[0].argmax())


def test_seed_reproduces_and_mixes_with_greedy_rows():
    logits = torch.randn(3, 100)
    def draw(seed):
        states = [SamplerState(SamplingParams(temperature=0)), SamplerState(SamplingParams(seed=seed)), SamplerState(SamplingParams(seed=seed + 1))]
        return [sample_batch(logits, states).tolist() for _ in range(20)]
    assert draw(5) == draw(5)
    assert draw(5) != draw(6)


def test_top_k_and_top_p_restrict_the_choice():
    logits = torch.tensor([[5.0, 4.0, 3.0, -10.0, -10.0]])
    state = SamplerState(SamplingParams(top_k=2, seed=1))
    assert {int(sample_batch(logits, [state])) for _ in range(200)} <= {0, 1}
    state = SamplerState(SamplingParams(top_p=0.5, seed=1))
    assert {int(sample_batch(logits, [state])) for _ in range(100)} == {0}


def test_repetition_penalty():
    logits = torch.tensor([2.0, 1.9, -1.0])
    penalized = apply_repetition_penalty(logits, torch.tensor([0, 2]), 2.0)
    assert torch.allclose(penalized, torch.tensor([1.0, 1.9, -2.0]))
    state = SamplerState(SamplingParams(temperature=0, repetition_penalty=2.0))
    assert int(sample_batch(logits[None], [state], [torch.tensor([0])])) == 1


def test_invalid_params():
    for bad in ({"temperature": -1}, {"top_p": 0}, {"top_k": -2}, {"repetition_penalty": 0}, {"max_new_tokens": 0}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def test_stream_zero_draws_as_torch_manual_seed_and_other_streams_differ():
    from vocalis.stages.runtime.sampling import stream_seed

    torch.manual_seed(1234)
    reference = torch.randn(16)
    assert torch.equal(torch.randn(16, generator=SamplerState(SamplingParams(seed=1234)).generator), reference)
    second = torch.randn(16, generator=SamplerState(SamplingParams(seed=1234), stream=1).generator)
    assert not torch.allclose(second, reference)
    assert stream_seed(1234, 1) != stream_seed(1235, 1) and stream_seed(-5) == -5


def test_batched_rows_seeded_whatever_the_batch_greedy_exact():
    torch.manual_seed(0)
    logits = torch.randn(3, 40)
    params = [SamplingParams(seed=3, top_k=10), SamplingParams(temperature=0), SamplingParams(seed=4, top_p=0.7, temperature=0.8)]

    def run(rows):
        states = [SamplerState(params[i]) for i in rows]
        return torch.stack([sample_states(logits[rows], states) for _ in range(30)])

    together = run([0, 1, 2])
    assert torch.equal(together[:, 0], run([0])[:, 0]) and torch.equal(together[:, 2], run([2])[:, 0])
    assert torch.equal(together[:, 1], logits[1].argmax().expand(30))
    assert not torch.equal(run([0]), run([2]))  # different seeds and filters, different draws
    assert set(together[:, 0].tolist()) <= set(logits[0].topk(10).indices.tolist())
    assert len(set(together[:, 0].tolist())) > 1


def test_batched_rows_draw_the_filtered_distribution():
    logits = torch.log(torch.tensor([[0.6, 0.2, 0.15, 0.05]])).expand(4000, 4)
    generators = [torch.Generator().manual_seed(i) for i in range(4000)]
    counts = torch.bincount(sample_rows(logits, [SamplingParams()] * 4000, generators), minlength=4).float() / 4000
    # statistical, not rounding: a frequency of 4000 draws is off by sigma <= 0.5 / sqrt(4000) = 0.008; 0.03 is 3.8 sigma
    assert torch.allclose(counts, torch.tensor([0.6, 0.2, 0.15, 0.05]), atol=0.03)
    counts = torch.bincount(sample_rows(logits, [SamplingParams(top_k=2)] * 4000, generators), minlength=4).float() / 4000
    assert torch.allclose(counts, torch.tensor([0.75, 0.25, 0.0, 0.0]), atol=0.03)
    kept = sample_rows(logits, [SamplingParams(top_p=0.7)] * 4000, generators)  # 0.6 then 0.2 crosses 0.7
    assert set(kept.tolist()) == {0, 1}


def test_repeat_redraw_only_for_repeats_and_not_for_exempt_rows():
    logits = torch.zeros(3, 1000)  # uniform: a redraw almost never lands on the same token
    picks = torch.tensor([5, 6, 7])
    recent = torch.tensor([[5, -1], [1, 2], [7, 7]])
    states = [SamplerState(SamplingParams(seed=s)) for s in (1, 2, 3)]
    out = redraw_repeats(logits, picks, recent, states, SamplingParams(top_k=900), exempt=torch.tensor([False, False, True]))
    assert int(out[0]) != 5 and out[1:].tolist() == [6, 7]
    again = redraw_repeats(logits[:1], picks[:1], recent[:1], [SamplerState(SamplingParams(seed=1))], SamplingParams(top_k=900))
    assert int(again[0]) == int(out[0])  # the row's own generator: the same second draw alone


def seen_mask(history: torch.Tensor | None, vocab: int) -> torch.Tensor | None:
    """A history's ids marked token by token, as a sequence marks them while it generates."""
    if history is None:
        return None
    seen = SeenTokens(vocab, "cpu")
    for token in history:
        mark_seen([seen], token[None])
    return seen.mask


def test_batched_repetition_penalty_matches_the_per_row_path():
    torch.manual_seed(5)
    logits = torch.randn(3, 30)
    histories = [torch.tensor([logits[0].argmax(), 4, 4]), None, torch.tensor([logits[2].argmax()])]
    seen = [seen_mask(h, 30) for h in histories]
    assert seen[0].nonzero()[:, 0].tolist() == sorted({int(logits[0].argmax()), 4})
    params = [SamplingParams(temperature=0, repetition_penalty=1e3), SamplingParams(temperature=0, repetition_penalty=2.0),
              SamplingParams(repetition_penalty=1.3)]
    penalized = penalize_rows(logits, params, seen)
    for i in (0, 2):
        assert torch.equal(penalized[i], apply_repetition_penalty(logits[i], histories[i], params[i].repetition_penalty))
    assert torch.equal(penalized[1], logits[1])
    greedy = sample_rows(logits[:2], params[:2], [None, None], seen[:2])
    states = [SamplerState(p) for p in params[:2]]
    assert torch.equal(greedy, sample_batch(logits[:2], states, histories[:2]))
    assert int(greedy[0]) != int(logits[0].argmax())  # the penalty moved the greedy pick
    row = torch.log_softmax(logits[2:], dim=-1).expand(4000, 30)
    generators = [torch.Generator().manual_seed(i) for i in range(4000)]
    counts = torch.bincount(sample_rows(row, [params[2]] * 4000, generators, [seen[2]] * 4000), minlength=30) / 4000
    expected = torch.softmax(apply_repetition_penalty(row[0], histories[2], 1.3), dim=-1)
    assert torch.allclose(counts.float(), expected, atol=0.03)  # statistical: 3.8 sigma of 4000 draws
    assert SeenTokens.for_params(SamplingParams(), 30, "cpu") is None  # no penalty, nothing kept


def test_codebook_rows_seeded_whatever_the_batch_greedy_exact():
    torch.manual_seed(1)
    logits = torch.randn(3, 4, 50)  # 4 codebooks per row
    params = [SamplingParams(seed=3, top_k=10), SamplingParams(temperature=0), SamplingParams(seed=4, top_p=0.7)]

    def run(rows):
        states = [SamplerState(params[i]) for i in rows]
        return torch.stack([sample_states(logits[rows], states) for _ in range(20)])

    together = run([0, 1, 2])
    assert together.shape == (20, 3, 4)
    assert torch.equal(together[:, 0], run([0])[:, 0]) and torch.equal(together[:, 2], run([2])[:, 0])
    assert torch.equal(together[:, 1], logits[1].argmax(-1).expand(20, 4))
    for k in range(4):
        assert set(together[:, 0, k].tolist()) <= set(logits[0, k].topk(10).indices.tolist())
    assert len(set(together[:, 0, 0].tolist())) > 1
