"""Per-frame sub-generation: the small autoregressive decoder that fills in a frame's remaining codebooks one at a
time after the backbone has produced the frame's hidden state and first code (Qwen3-TTS's code predictor, Fish
S2 Pro's fast AR).

The loop is the same for every such decoder; what differs (the input layout, the head and embedding of each
codebook) is passed in.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Step = Callable[[torch.Tensor, list[list[torch.Tensor]], int], torch.Tensor]
"""step(inputs [B, T, H], per-layer caches, start position) -> hidden [B, T, H'] (extending the caches)."""


def generate_frame_codes(first_inputs: torch.Tensor, step: Step, layers: int, groups: int,
                         head: Callable[[int, torch.Tensor], torch.Tensor],
                         embed: Callable[[int, torch.Tensor], torch.Tensor],
                         choose: Callable[[int, torch.Tensor], torch.Tensor],
                         forced: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes [B, groups] and logits [B, groups, V] of one frame per row.

    `first_inputs` [B, n, H] start the sequence (the backbone's hidden state, the first code's embedding);
    `head(group, hidden [B, H']) -> logits [B, V]`; `embed(group, codes [B]) -> [B, H]` feeds a chosen code back;
    `choose(group, logits) -> codes [B]` samples (it lives with the caller); `forced` [B, groups] feeds given codes
    instead (teacher forcing) while still returning the logits.
    """
    caches: list[list[torch.Tensor]] = [[] for _ in range(layers)]
    hidden = step(first_inputs, caches, 0)[:, -1]
    position = first_inputs.shape[1]
    codes, logits = [], []
    for group in range(groups):
        group_logits = head(group, hidden)
        logits.append(group_logits)
        code = forced[:, group] if forced is not None else choose(group, group_logits)
        codes.append(code)
        if group + 1 < groups:
            hidden = step(embed(group, code)[:, None], caches, position)[:, -1]
            position += 1
    return torch.stack(codes, dim=1), torch.stack(logits, dim=1)
