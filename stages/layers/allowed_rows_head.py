"""An output head over a vocabulary of which a sampler may pick only a few tokens: the logits of those tokens alone,
laid out over the whole vocabulary with -inf for every other token.

Why: GLM-TTS and Fish S2 Pro tie their head to their text embeddings (98,304 and ~155k rows), and a speech step may
only pick a speech token or a stop (32,768 and 4,097 of them); the rest were computed and then masked. The kept rows
are a linear of their own, so the stage's `packed_linears` and `quantize` settings apply to it as to every other
linear of the generator, and a step reads a third (GLM-TTS) or a fortieth (Fish S2 Pro) of the tied matrix. The
embeddings keep the full matrix for the prompt's tokens; the copy of the kept rows costs their bytes once (268 MB for
GLM-TTS in float32, 21 MB for Fish S2 Pro in bfloat16).

Measured at GLM-TTS's real size on two cores (float32, a tied [98304, 2048] head: `hidden @ weight.T` through MKL
against oneDNN's packed product of the same rows): 45 / 142 ms at 1 / 4 rows, 30 / 39 ms packed, before any row is
dropped. The sampled distribution is the same: a masked token had probability 0 either way.
"""

from __future__ import annotations

import torch
from torch import nn


class AllowedRowsHead(nn.Module):
    """Logits [..., vocab] (float32) of `weight`'s rows flagged in `allowed`, -inf elsewhere."""

    def __init__(self, weight: torch.Tensor, allowed: torch.Tensor) -> None:
        super().__init__()
        if allowed.dtype != torch.bool or allowed.shape != weight.shape[:1]:
            raise ValueError(f"allowed must be a bool mask over the head's {weight.shape[0]} rows, got {allowed.dtype} {tuple(allowed.shape)}")
        ids = allowed.nonzero().flatten()
        if not len(ids):
            raise ValueError("a head with no allowed token")
        self.vocab_size = weight.shape[0]
        self.register_buffer("ids", ids.to(weight.device), persistent=False)
        self.rows = nn.Linear(weight.shape[1], len(ids), bias=False, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            self.rows.weight.copy_(weight.detach()[self.ids])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        kept = self.rows(hidden).float()
        out = kept.new_full((*kept.shape[:-1], self.vocab_size), float("-inf"))
        return out.index_copy_(-1, self.ids, kept)
