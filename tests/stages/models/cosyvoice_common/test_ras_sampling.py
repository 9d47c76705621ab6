"""Batched RAS on the device (stages/models/cosyvoice_common/ras_sampling.py) against the published rule written out per row: CosyVoice's
`nucleus_sampling` loop and `ras_sampling` redraw, step by step over a window, with its two multinomial draws taken
by inverse CDF from the row's uniforms [nucleus, whole distribution] (the device's contract). Also: greedy rows take
the argmax and draw nothing, a row's tokens do not depend on its batch (mixed with the plain sampler), a seed repeats
its tokens, and the draws follow the kept probabilities."""

from __future__ import annotations

import torch

from vocalis.stages.models.cosyvoice_common.ras_sampling import RASParams, SamplingHistory, ras_rows, sample_speech_tokens
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams

VOCAB = 200


def pick(weights: torch.Tensor, u: float) -> int:
    """The first position whose running sum reaches u x the total (a multinomial draw made with uniform u)."""
    target, running = u * float(weights.sum()), 0.0
    for i, w in enumerate(weights.tolist()):
        running += w
        if running >= target and w > 0:
            return i
    return len(weights) - 1


def published(logits: torch.Tensor, temperature: float, ras: RASParams, history: list[int],
              generator: torch.Generator) -> tuple[int, bool]:
    """One row's token by the published rule, and whether it was redrawn."""
    if temperature == 0:
        return int(torch.argmax(logits)), False
    u = torch.rand(2, generator=generator)
    scores = torch.softmax(logits.float() / temperature, dim=0)
    sorted_value, sorted_idx = scores.sort(descending=True, stable=True)
    prob, indices, cum_prob = [], [], 0.0
    for i in range(len(sorted_idx)):
        if cum_prob < ras.top_p and len(prob) < ras.top_k:
            cum_prob += sorted_value[i]
            prob.append(sorted_value[i])
            indices.append(sorted_idx[i])
        else:
            break
    token = int(indices[pick(torch.stack(prob), float(u[0]))])
    repeats = sum(1 for t in history[-ras.win_size:] if t == token)
    if repeats >= ras.win_size * ras.tau_r:
        return int(sorted_idx[pick(sorted_value, float(u[1]))]), True
    return token, False


ROWS = [  # (temperature, RAS): the defaults, tight and loose nuclei, top_k 1, windows of 1..10, tau_r 0 and 1
    (1.0, RASParams()),
    (0.7, RASParams(top_p=0.5, top_k=3, win_size=3, tau_r=0.34)),
    (1.3, RASParams(top_p=1.0, top_k=1000, win_size=1, tau_r=1.0)),
    (1.0, RASParams(top_p=0.95, top_k=1, win_size=10, tau_r=0.3)),  # 10 x 0.3 is 3.0000000000000004: 4 repeats
    (0.9, RASParams(top_p=0.8, top_k=25, win_size=4, tau_r=0.0)),  # always the whole distribution
    (0.0, RASParams()),  # greedy
]


def step_logits(generator: torch.Generator, rows: int) -> torch.Tensor:
    """Peaked logits (a few likely tokens) so picks repeat within a window."""
    return torch.randn(rows, VOCAB, generator=generator) * 3.0


def test_device_ras_matches_the_published_rule_step_by_step():
    seeds = [11 * i + 3 for i in range(len(ROWS))]
    samplers = [SamplerState(SamplingParams(temperature=t, seed=s)) for (t, _), s in zip(ROWS, seeds, strict=True)]
    histories = [SamplingHistory.start(st.params, ras, VOCAB, "cpu") for st, (_, ras) in zip(samplers, ROWS, strict=True)]
    references = [torch.Generator().manual_seed(s) for s in seeds]
    past: list[list[int]] = [[] for _ in ROWS]
    redrawn = kept = 0
    logits_source = torch.Generator().manual_seed(0)
    for _ in range(60):
        logits = step_logits(logits_source, len(ROWS))
        tokens = sample_speech_tokens(logits, samplers, histories).tolist()
        for row, ((temperature, ras), generator) in enumerate(zip(ROWS, references, strict=True)):
            expected, again = published(logits[row], temperature, ras, past[row], generator)
            assert tokens[row] == expected, (row, len(past[row]))
            past[row].append(expected)
            redrawn += again
            kept += temperature > 0 and not again
    assert redrawn > 30 and kept > 30  # both branches taken
    assert all(h.steps == 60 for h in histories)
    assert histories[-1].recent is None  # greedy: no window


def test_greedy_rows_take_the_argmax_and_draw_nothing():
    sampler = SamplerState(SamplingParams(temperature=0.0, seed=5))
    before = sampler.generator.get_state()
    logits = step_logits(torch.Generator().manual_seed(1), 4)
    histories = [SamplingHistory.start(sampler.params, RASParams(), VOCAB, "cpu") for _ in range(4)]
    tokens = sample_speech_tokens(logits, [sampler] * 4, histories)
    assert torch.equal(tokens, logits.argmax(-1))
    assert torch.equal(sampler.generator.get_state(), before)


def mixed_requests() -> list[tuple[SamplingParams, RASParams | None]]:
    """RAS rows of each kind beside the plain sampler (a penalty with top-k/top-p, plain top-k, greedy)."""
    return [(SamplingParams(temperature=t, seed=40 + i), ras) for i, (t, ras) in enumerate(ROWS)] + [
        (SamplingParams(temperature=0.7, top_k=20, top_p=0.8, repetition_penalty=1.21, seed=90), None),
        (SamplingParams(temperature=1.0, top_k=25, seed=91), None),
        (SamplingParams(temperature=0.0, repetition_penalty=1.5), None),
    ]


def tokens_of(requests: list[tuple[SamplingParams, RASParams | None]], rows: list[int], steps: int = 25) -> torch.Tensor:
    """[steps, len(rows)] tokens of the chosen requests served together; every request's logits are fixed by its
    index, whatever the batch."""
    samplers = [SamplerState(requests[i][0]) for i in rows]
    histories = [SamplingHistory.start(requests[i][0], requests[i][1], VOCAB, "cpu") for i in rows]
    out = []
    for step in range(steps):
        logits = torch.stack([step_logits(torch.Generator().manual_seed(1000 * step + i), 1)[0] for i in rows])
        out.append(sample_speech_tokens(logits, samplers, histories))
    return torch.stack(out)


def test_a_rows_tokens_do_not_depend_on_its_batch_and_repeat_with_its_seed():
    requests = mixed_requests()
    everyone = list(range(len(requests)))
    together = tokens_of(requests, everyone)
    for i in everyone:
        assert torch.equal(tokens_of(requests, [i])[:, 0], together[:, i]), i
    reordered = everyone[::-1]
    assert torch.equal(tokens_of(requests, reordered), together[:, reordered])
    assert torch.equal(tokens_of(requests, everyone), together)
    other = [(SamplingParams(temperature=p.temperature, seed=p.seed + 1 if p.seed is not None else None), r) for p, r in requests]
    differs = tokens_of(other, everyone) != together
    assert differs[:, 0].any() and differs[:, 6].any()


def test_draws_follow_the_kept_probabilities():
    logits = torch.tensor([3.0, 2.0, 1.5, 1.0, 0.0, -1.0, -2.0, -4.0])
    probs = torch.softmax(logits, 0)
    draws = 6000
    params = [SamplingParams()] * draws
    generators = [torch.Generator().manual_seed(i) for i in range(draws)]
    never = [torch.full((4,), -1)] * draws
    nucleus = ras_rows(logits.expand(draws, -1), params, [RASParams(top_p=0.8, top_k=25, win_size=4)] * draws, generators, never)
    kept = probs[:3] / probs[:3].sum()  # running sums before them: 0, 0.55, 0.76; the fourth starts at 0.88
    # statistical, not rounding: a frequency of 6000 draws is off by sigma <= 0.5 / sqrt(6000) = 0.0065; 0.02 is 3.1 sigma
    assert torch.allclose(torch.bincount(nucleus, minlength=8)[:3] / draws, kept, atol=0.02)
    assert int(nucleus.max()) == 2
    whole = ras_rows(logits.expand(draws, -1), params, [RASParams(tau_r=0.0, win_size=4)] * draws, generators, never)
    assert torch.allclose(torch.bincount(whole, minlength=8) / draws, probs, atol=0.02)


def test_ties_keep_the_lower_ids_and_top_p_is_a_strict_bound():
    logits = torch.zeros(200, 4)  # four tokens at exactly 0.25: kept while the sum before is below 0.5, so ids 0 and 1
    ras = RASParams(top_p=0.5, top_k=25, win_size=4)
    generators = [torch.Generator().manual_seed(i) for i in range(200)]
    drawn = ras_rows(logits, [SamplingParams()] * 200, [ras] * 200, generators, [torch.full((4,), -1)] * 200)
    assert set(drawn.tolist()) == {0, 1}
    references = [torch.Generator().manual_seed(i) for i in range(200)]
    assert drawn.tolist() == [published(logits[i], 1.0, ras, [], references[i])[0] for i in range(200)]
