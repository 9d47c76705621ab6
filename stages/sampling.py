"""Per-request sampling of next tokens from a batch of logits.

Each row of a batch may have its own temperature, top-k, top-p, repetition
penalty and seed. Greedy decoding (temperature 0, or top-k 1) is an exact argmax,
so a greedy request's tokens do not depend on what else is in its batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How one request picks its tokens."""

    temperature: float = 1.0
    """0 means greedy."""
    top_k: int = 0
    """Keep the k most likely tokens; 0 keeps all."""
    top_p: float = 1.0
    """Keep the smallest set of tokens whose probability reaches top_p."""
    repetition_penalty: float = 1.0
    """Above 1 discourages tokens already generated (CTRL-style: divide positive logits, multiply negative)."""
    seed: int | None = None
    """With a seed, the request's draws are reproducible whatever its batch."""
    max_new_tokens: int = 2048
    """Stop after this many generated steps."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be > 0")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1


def stream_seed(seed: int, stream: int = 0) -> int:
    """The generator seed of a request's random stream `stream`.

    Stream 0 is the plain seed, so that a family whose draws follow its reference's order
    reproduces `torch.manual_seed(seed)` + the reference call. Other streams (a second
    sampler of the same request, such as Qwen3-TTS's sub-talker) are derived from it.
    """
    return seed if stream == 0 else (seed * 1_000_003 + stream) % 2**63


class SamplerState:
    """The random generator of one request (None when unseeded: the global generator is used).

    `generator` is a CPU generator (for draws a family makes on the host); draws on another device
    use a generator of that device, seeded alike, so sampling never leaves the logits' device.
    """

    def __init__(self, params: SamplingParams, stream: int = 0) -> None:
        self.params = params
        self.generator: torch.Generator | None = None
        self._seed = None if params.seed is None else stream_seed(params.seed, stream)
        if self._seed is not None:
            self.generator = torch.Generator(device="cpu").manual_seed(self._seed)
        self._device_generators: dict[torch.device, torch.Generator] = {}

    def generator_for(self, device: torch.device) -> torch.Generator | None:
        if self._seed is None or device.type == "cpu":
            return self.generator
        if device not in self._device_generators:
            self._device_generators[device] = torch.Generator(device=device).manual_seed(self._seed)
        return self._device_generators[device]


def apply_repetition_penalty(logits: torch.Tensor, history: torch.Tensor, penalty: float) -> torch.Tensor:
    """Penalize the token ids in `history` in a 1-D row of logits (returns a new tensor)."""
    if penalty == 1.0 or history.numel() == 0:
        return logits
    logits = logits.clone()
    ids = torch.unique(history)
    picked = logits[ids]
    logits[ids] = torch.where(picked > 0, picked / penalty, picked * penalty)
    return logits


def sample_row(logits: torch.Tensor, state: SamplerState, history: torch.Tensor | None = None) -> torch.Tensor:
    """One token id (a 0-d tensor on the logits' device) from a 1-D row of logits under `state`'s parameters."""
    params = state.params
    if history is not None:
        logits = apply_repetition_penalty(logits, history, params.repetition_penalty)
    if params.greedy:
        return torch.argmax(logits)
    logits = logits.float() / params.temperature
    if params.top_k > 0 and params.top_k < logits.numel():
        threshold = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < threshold, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= params.top_p  # keep the token that crosses top_p
        logits = logits.clone()
        logits[order[drop]] = float("-inf")
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=state.generator_for(probs.device))[0]


def sample_batch(
    logits: torch.Tensor, states: list[SamplerState], histories: list[torch.Tensor | None] | None = None
) -> torch.Tensor:
    """Token ids for logits [B, V] (or [B, K, V]: K codebooks per row), row i under states[i].

    histories[i] holds row i's earlier tokens ([n] or [n, K]) for the repetition penalty.
    Greedy rows without a penalty are one batched argmax.
    """
    plain = [
        state.params.greedy and (state.params.repetition_penalty == 1.0 or not histories or histories[i] is None)
        for i, state in enumerate(states)
    ]
    if all(plain):
        return torch.argmax(logits, dim=-1)
    out = torch.empty(logits.shape[:-1], dtype=torch.long, device=logits.device)
    greedy = [i for i, p in enumerate(plain) if p]
    if greedy:
        index = torch.tensor(greedy, device=logits.device)
        out[index] = torch.argmax(logits[index], dim=-1)
    for i, state in enumerate(states):
        if plain[i]:
            continue
        history = histories[i] if histories else None
        if logits.dim() == 2:
            out[i] = sample_row(logits[i], state, history)
        else:
            for k in range(logits.shape[1]):
                column = history[:, k] if history is not None and history.numel() else None
                out[i, k] = sample_row(logits[i, k], state, column)
    return out


def penalize_rows(logits: torch.Tensor, params: list[SamplingParams],
                  histories: list[torch.Tensor | None]) -> torch.Tensor:
    """`apply_repetition_penalty` for every row of logits [B, V] at once: row i's ids in histories[i] (1-D, any
    device) under params[i].repetition_penalty. One scatter of all histories, no host read."""
    rows = [i for i, (p, h) in enumerate(zip(params, histories, strict=True))
            if p.repetition_penalty != 1.0 and h is not None and h.numel()]
    if not rows:
        return logits
    device = logits.device
    ids = torch.cat([histories[i].reshape(-1) for i in rows]).to(device, non_blocking=True)
    owner = torch.cat([torch.full((histories[i].numel(),), i, dtype=torch.long, device=device) for i in rows])
    seen = torch.zeros(logits.shape, dtype=torch.bool, device=device)
    seen[owner, ids] = True
    penalty = torch.tensor([p.repetition_penalty for p in params], dtype=logits.dtype, device=device)[:, None]
    return torch.where(seen, torch.where(logits > 0, logits / penalty, logits * penalty), logits)


def sample_rows(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None],
                histories: list[torch.Tensor | None] | None = None) -> torch.Tensor:
    """Token ids [B] on the logits' device for logits [B, V], row i under params[i] with generators[i].

    Batched: the repetition penalty over histories[i] (row i's earlier tokens, as `sample_batch`), then one sort of
    every row (top-k, then top-p over what top-k keeps, then the draw by inverse CDF). Each sampled row takes one
    uniform from its own generator (of the logits' device; None draws from the global one), so a seeded row's tokens
    do not depend on its batch; greedy rows are an exact argmax (of the penalized logits) and draw nothing.
    """
    assert len(params) == len(generators) == logits.shape[0], "one params and one generator per row"
    device = logits.device
    if histories is not None:
        logits = penalize_rows(logits, params, histories)
    greedy = [p.greedy for p in params]
    picks = torch.argmax(logits, dim=-1)
    if all(greedy):
        return picks
    vocab = logits.shape[-1]
    temperature = torch.tensor([1.0 if p.greedy else p.temperature for p in params], device=device)
    top_k = torch.tensor([p.top_k if 0 < p.top_k < vocab else vocab for p in params], device=device)
    top_p = torch.tensor([p.top_p for p in params], device=device)
    ordered, order = torch.sort(logits.float() / temperature[:, None], dim=-1, descending=True)
    ordered = ordered.masked_fill(torch.arange(vocab, device=device)[None] >= top_k[:, None], float("-inf"))
    probs = torch.softmax(ordered, dim=-1)
    probs = probs.masked_fill(probs.cumsum(-1) - probs >= top_p[:, None], 0.0)  # keep the token that crosses top_p
    zero = torch.zeros(1, device=device)
    uniform = torch.cat([zero if g else torch.rand(1, generator=gen, device=device)
                         for g, gen in zip(greedy, generators, strict=True)])
    cdf = probs.cumsum(-1)
    rank = (cdf < uniform[:, None] * cdf[:, -1:]).sum(-1).clamp(max=vocab - 1)
    drawn = order.gather(-1, rank[:, None])[:, 0]
    return torch.where(torch.tensor(greedy, device=device), picks, drawn)


def sample_states(logits: torch.Tensor, states: list[SamplerState],
                  histories: list[torch.Tensor | None] | None = None) -> torch.Tensor:
    """`sample_rows` under each row's request state, with its generator of the logits' device."""
    return sample_rows(logits, [s.params for s in states], [s.generator_for(logits.device) for s in states], histories)


def redraw_repeats(logits: torch.Tensor, picks: torch.Tensor, recent: torch.Tensor, states: list[SamplerState],
                   params: SamplingParams, exempt: torch.Tensor | None = None) -> torch.Tensor:
    """The repeat-redraw rule: a pick [B] found among its row's recent picks (recent [B, W], -1 for none yet) is drawn
    again from the same logits [B, V] under `params`, with the row's own generator.

    Every row makes the second draw, whether it repeats or not, so the draws a seeded row takes never depend on
    its tokens being known on the host (nothing syncs) nor on its batch. Rows flagged in `exempt` keep their pick.
    """
    again = sample_rows(logits, [params] * len(states), [s.generator_for(logits.device) for s in states])
    repeats = (picks[:, None] == recent).any(dim=-1)
    if exempt is not None:
        repeats &= ~exempt
    return torch.where(repeats, again, picks)
