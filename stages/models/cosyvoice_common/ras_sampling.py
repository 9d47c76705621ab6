"""Repetition-aware sampling (RAS, from VALL-E 2), as CosyVoice and GLM-TTS sample speech tokens, batched on the
model's device.

The rule, per row, as the published `ras_sampling` / `nucleus_sampling` (CosyVoice `cosyvoice/utils/common.py`):
the probabilities are softmax(logits / temperature); nucleus sampling walks them in descending order (a stable sort:
ties by token id) and keeps a token while the sum of those kept before it is below `top_p` and fewer than `top_k` are
kept (so the token that crosses top_p is kept, and at least one always is), then draws among the kept in proportion
to their probabilities. If the drawn token occurs at least `win_size * tau_r` times among the row's last `win_size`
tokens (fewer at the start: all of them), it is replaced by a draw from the whole distribution. Temperature 0 is
greedy: the argmax, no draw (and no window).

On the device, every row draws two uniforms from its own generator each step, [nucleus, whole distribution], both
by inverse CDF over the sorted probabilities, and the repeat count picks one with `torch.where`: nothing is read
back, and a seeded row's tokens do not depend on its batch. The window is a ring on the device written in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vocalis.stages.models.cosyvoice_common.ras_params import RASParams
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, SeenTokens, inverse_cdf, sample_rows


class RecentTokens:
    """The last `size` tokens of one sequence as a ring [size] on the device, -1 where there is none yet, in no
    order; written in place, one position per token (the position is known on the host)."""

    def __init__(self, size: int, device: torch.device | str) -> None:
        self.ring = torch.full((size,), -1, dtype=torch.long, device=device)
        self.pushed = 0

    def push(self, token: torch.Tensor) -> None:
        """Add a token id (a 0-d or 1-element tensor on the ring's device; no host read)."""
        self.ring[self.pushed % self.ring.shape[0]].copy_(token.reshape(()))
        self.pushed += 1


def ras_rows(logits: torch.Tensor, params: list[SamplingParams], ras: list[RASParams],
             generators: list[torch.Generator | None], recent: list[torch.Tensor]) -> torch.Tensor:
    """Token ids [B] on the logits' device for logits [B, V] under RAS, row i with temperature params[i].temperature
    (> 0), ras[i], generators[i] (of the logits' device; None: the global one) and its window recent[i] ([W_i] ids,
    -1 for none). See the module docstring for the rule; each row takes two uniforms from its generator."""
    assert len(params) == len(ras) == len(generators) == len(recent) == logits.shape[0], "one of each per row"
    assert all(not p.greedy for p in params), "greedy rows take the argmax (sample_rows)"
    device, vocab = logits.device, logits.shape[-1]
    temperature = torch.tensor([p.temperature for p in params], device=device)
    probs = torch.softmax(logits.float() / temperature[:, None], dim=-1)
    values, order = probs.sort(dim=-1, descending=True, stable=True)
    before = F.pad(values.cumsum(-1)[:, :-1], (1, 0))  # the running sum of the tokens ahead of each
    top_p = torch.tensor([r.top_p for r in ras], device=device)
    top_k = torch.tensor([r.top_k for r in ras], device=device)
    kept = (before < top_p[:, None]) & (torch.arange(vocab, device=device) < top_k[:, None])
    uniform = torch.stack([torch.rand(2, generator=g, device=device) for g in generators])  # [B, 2]
    nucleus = inverse_cdf(values.masked_fill(~kept, 0.0), uniform[:, 0])
    anything = inverse_cdf(values, uniform[:, 1])
    tokens = order.gather(-1, torch.stack([nucleus, anything], dim=-1))  # [B, 2]
    width = max(w.shape[0] for w in recent)
    window = torch.stack([w if w.shape[0] == width else F.pad(w, (0, width - w.shape[0]), value=-1) for w in recent])
    repeats = (window == tokens[:, :1]).sum(-1)
    need = [r.repeats_to_redraw for r in ras]
    limit = need[0] if len(set(need)) == 1 else torch.tensor(need, device=device)
    return torch.where(repeats >= limit, tokens[:, 1], tokens[:, 0])


@dataclass
class SamplingHistory:
    """What one sequence's sampling reads of its past, on the model's device and updated in place from its tokens:
    the RAS window (a sampled RAS request) or the ids seen (a repetition penalty); and how many tokens it has drawn
    (on the host: it depends on no drawn value)."""

    ras: RASParams | None = None
    """None: the plain sampler (`sample_rows`), as for greedy requests."""
    recent: RecentTokens | None = None
    seen: SeenTokens | None = None
    steps: int = 0

    @classmethod
    def start(cls, params: SamplingParams, ras: RASParams | None, vocab: int, device: torch.device | str) -> SamplingHistory:
        """A new sequence's history: RAS (with its window) unless `ras` is None or the request is greedy."""
        if ras is not None and not params.greedy:
            return cls(ras, RecentTokens(ras.win_size, device))
        return cls(seen=SeenTokens.for_params(params, vocab, device))

    def record(self, token: torch.Tensor) -> None:
        if self.recent is not None:
            self.recent.push(token)
        if self.seen is not None:
            self.seen.mark(token)
        self.steps += 1


def sample_speech_tokens(logits: torch.Tensor, samplers: list[SamplerState], histories: list[SamplingHistory]) -> torch.Tensor:
    """Token ids [B] on the logits' device for logits [B, V]: rows with RAS in their history by `ras_rows`, the others
    by `sample_rows` (with the repetition penalty over their seen ids); then each history records its token. No host
    read."""
    device = logits.device
    params = [s.params for s in samplers]
    generators = [s.generator_for(device) for s in samplers]
    ras = [i for i, h in enumerate(histories) if h.ras is not None]
    plain = [i for i, h in enumerate(histories) if h.ras is None]

    def under_ras(rows: list[int], rows_logits: torch.Tensor) -> torch.Tensor:
        return ras_rows(rows_logits, [params[i] for i in rows], [histories[i].ras for i in rows],
                        [generators[i] for i in rows], [histories[i].recent.ring for i in rows])

    def plainly(rows: list[int], rows_logits: torch.Tensor) -> torch.Tensor:
        seen = [histories[i].seen.mask if histories[i].seen is not None else None for i in rows]
        return sample_rows(rows_logits, [params[i] for i in rows], [generators[i] for i in rows],
                           seen if any(s is not None for s in seen) else None)

    if not plain:
        tokens = under_ras(ras, logits)
    elif not ras:
        tokens = plainly(plain, logits)
    else:  # a mixed batch: each group on its own rows (which rows is known on the host)
        tokens = torch.empty(len(histories), dtype=torch.long, device=device)
        for rows, sample in ((ras, under_ras), (plain, plainly)):
            index = torch.tensor(rows, device=device)
            tokens.index_copy_(0, index, sample(rows, logits.index_select(0, index)))
    for i, history in enumerate(histories):
        history.record(tokens[i])
    return tokens
