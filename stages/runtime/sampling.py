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


class SeenTokens:
    """The token ids one sequence has generated, as a [V] bool mask on the model's device, marked in place as its
    tokens are drawn: all a repetition penalty needs (each id is penalized once, however often it came), and nothing
    is rebuilt from the host's copy of the history each step."""

    def __init__(self, vocab: int, device: torch.device | str) -> None:
        self.mask = torch.zeros(vocab, dtype=torch.bool, device=device)

    @classmethod
    def for_params(cls, params: SamplingParams, vocab: int, device: torch.device | str) -> SeenTokens | None:
        """A mask for a request under a repetition penalty; None (nothing to keep) without one."""
        return cls(vocab, device) if params.repetition_penalty != 1.0 else None

    def mark(self, token: torch.Tensor) -> None:
        """Add a token id (a 0-d or 1-element tensor on the mask's device; no host read)."""
        self.mask.index_fill_(0, token.reshape(1), True)


def mark_seen(seen: list[SeenTokens | None], tokens: torch.Tensor) -> None:
    """Mark row i's token tokens[i] (ids [B] on the device) in seen[i], for the rows that keep one."""
    for i, row in enumerate(seen):
        if row is not None:
            row.mark(tokens[i])


def penalize_rows(logits: torch.Tensor, params: list[SamplingParams], seen: list[torch.Tensor | None]) -> torch.Tensor:
    """`apply_repetition_penalty` for every row of logits [B, V] at once: row i's ids marked in seen[i] (a [V] bool
    mask on the logits' device, as `SeenTokens.mask`; None: no history) under params[i].repetition_penalty. No host
    read, and no upload but the penalties."""
    used = [p.repetition_penalty != 1.0 and s is not None for p, s in zip(params, seen, strict=True)]
    if not any(used):
        return logits
    device = logits.device
    none = torch.zeros(logits.shape[-1], dtype=torch.bool, device=device)
    mask = torch.stack([s if u else none for s, u in zip(seen, used, strict=True)])
    penalty = torch.tensor([p.repetition_penalty for p in params], dtype=logits.dtype, device=device)[:, None]
    return torch.where(mask, torch.where(logits > 0, logits / penalty, logits * penalty), logits)


def inverse_cdf(weights: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The position drawn from each row of non-negative weights [..., V] (unnormalized) by its uniform in [0, 1)
    (uniform [...]): the first whose running sum reaches uniform x the row's total. A zero-weight position is never
    drawn (unless the whole row is zero, or the uniform is 0 and the row's first weight is)."""
    cdf = weights.cumsum(-1)
    return (cdf < uniform[..., None] * cdf[..., -1:]).sum(-1).clamp(max=weights.shape[-1] - 1)


def sample_rows(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None],
                seen: list[torch.Tensor | None] | None = None) -> torch.Tensor:
    """Token ids [B] on the logits' device for logits [B, V], row i under params[i] with generators[i]; or ids [B, K]
    for logits [B, K, V] (K codebooks per row, all under the row's params).

    Batched: the repetition penalty over seen[i] (row i's earlier tokens as a [V] mask, see `penalize_rows`; [B, V]
    logits only), then one sort of every row (top-k, then top-p over what top-k keeps, then the draw by inverse CDF).
    Each sampled row takes K uniforms (one per codebook, in order) from its own generator (of the logits' device;
    None draws from the global one), so a seeded row's tokens do not depend on its batch; greedy rows are an exact
    argmax (of the penalized logits) and draw nothing.
    """
    assert len(params) == len(generators) == logits.shape[0], "one params and one generator per row"
    device = logits.device
    if seen is not None:
        assert logits.dim() == 2, "the repetition penalty is for [B, V] logits"
        logits = penalize_rows(logits, params, seen)
    greedy = [p.greedy for p in params]
    picks = torch.argmax(logits, dim=-1)
    if all(greedy):
        return picks
    vocab = logits.shape[-1]
    rows = logits.reshape(len(params), -1, vocab)  # [B, K, V], K = 1 for [B, V]
    books = rows.shape[1]
    temperature = torch.tensor([1.0 if p.greedy else p.temperature for p in params], device=device)
    top_k = torch.tensor([p.top_k if 0 < p.top_k < vocab else vocab for p in params], device=device)
    top_p = torch.tensor([p.top_p for p in params], device=device)
    ordered, order = torch.sort(rows.float() / temperature[:, None, None], dim=-1, descending=True)
    ordered = ordered.masked_fill(torch.arange(vocab, device=device) >= top_k[:, None, None], float("-inf"))
    probs = torch.softmax(ordered, dim=-1)
    probs = probs.masked_fill(probs.cumsum(-1) - probs >= top_p[:, None, None], 0.0)  # keep the token that crosses top_p
    zero = torch.zeros(books, device=device)
    uniform = torch.stack([zero if g else torch.rand(books, generator=gen, device=device)
                           for g, gen in zip(greedy, generators, strict=True)])
    drawn = order.gather(-1, inverse_cdf(probs, uniform)[..., None])[..., 0].reshape(picks.shape)
    chosen = torch.tensor(greedy, device=device).reshape(-1, *[1] * (picks.dim() - 1))
    return torch.where(chosen, picks, drawn)


def sample_states(logits: torch.Tensor, states: list[SamplerState], seen: list[torch.Tensor | None] | None = None) -> torch.Tensor:
    """`sample_rows` under each row's request state, with its generator of the logits' device."""
    return sample_rows(logits, [s.params for s in states], [s.generator_for(logits.device) for s in states], seen)


def redraw(logits: torch.Tensor, picks: torch.Tensor, again: torch.Tensor, states: list[SamplerState],
           params: SamplingParams) -> torch.Tensor:
    """picks ([B] or [B, K]) with those flagged in `again` drawn anew from the same logits ([B, V] or [B, K, V])
    under `params`, with each row's own generator.

    Every row makes the second draw, whether any of its picks is flagged or not, so the draws a seeded row takes never
    depend on its tokens being known on the host (nothing syncs) nor on its batch."""
    second = sample_rows(logits, [params] * len(states), [s.generator_for(logits.device) for s in states])
    return torch.where(again, second, picks)


def redraw_repeats(logits: torch.Tensor, picks: torch.Tensor, recent: torch.Tensor, states: list[SamplerState],
                   params: SamplingParams, exempt: torch.Tensor | None = None) -> torch.Tensor:
    """The repeat-redraw rule: a pick [B] found among its row's recent picks (recent [B, W], -1 for none yet) is drawn
    again from the same logits [B, V] under `params` (see `redraw`). Rows flagged in `exempt` keep their pick."""
    repeats = (picks[:, None] == recent).any(dim=-1)
    if exempt is not None:
        repeats &= ~exempt
    return redraw(logits, picks, repeats, states, params)
