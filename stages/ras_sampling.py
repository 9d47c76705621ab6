"""Repetition-aware sampling (RAS, from VALL-E 2), as CosyVoice and GLM-TTS sample speech tokens: nucleus sampling
(top-p, at most top-k tokens), redrawn from the whole distribution when the pick already fills `tau_r` of the last
`win_size` tokens. Draws use the request's own generator, so a seeded request is reproducible whatever its batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RASParams:
    top_p: float = 0.8
    top_k: int = 25
    win_size: int = 10
    tau_r: float = 0.1


def nucleus_sample(probs: torch.Tensor, top_p: float, top_k: int, generator: torch.Generator | None) -> int:
    """From 1-D probabilities: keep tokens in descending order while their running sum is below top_p (the one that
    crosses it included) and fewer than top_k are kept, then draw among them."""
    values, order = probs.sort(descending=True, stable=True)
    before = values.cumsum(0) - values
    keep = int(((before < top_p) & (torch.arange(len(values), device=values.device) < top_k)).sum())
    keep = max(keep, 1)
    pick = torch.multinomial(values[:keep], 1, replacement=True, generator=generator)
    return int(order[pick])


def ras_sample(logits: torch.Tensor, history: list[int], params: RASParams, generator: torch.Generator | None) -> int:
    probs = torch.softmax(logits.float(), dim=-1)
    token = nucleus_sample(probs, params.top_p, params.top_k, generator)
    repeats = sum(1 for t in history[-params.win_size:] if t == token)
    if repeats >= params.win_size * params.tau_r:
        token = int(torch.multinomial(probs, 1, replacement=True, generator=generator))
    return token
