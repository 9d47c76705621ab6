"""Per-request sampling: greedy is exact, seeds reproduce, filters do what they say."""

from __future__ import annotations

import pytest
import torch

from vocalis.stages.sampling import SamplerState, SamplingParams, apply_repetition_penalty, sample_batch


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
    from vocalis.stages.sampling import stream_seed

    torch.manual_seed(1234)
    reference = torch.randn(16)
    assert torch.equal(torch.randn(16, generator=SamplerState(SamplingParams(seed=1234)).generator), reference)
    second = torch.randn(16, generator=SamplerState(SamplingParams(seed=1234), stream=1).generator)
    assert not torch.allclose(second, reference)
    assert stream_seed(1234, 1) != stream_seed(1235, 1) and stream_seed(-5) == -5
