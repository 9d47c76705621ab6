"""CTC forced alignment: the most likely path of a known token sequence through frame-wise log-probabilities.

The path runs over the tokens with a blank before, between and after them (2L + 1 states); at each
frame it stays, moves on by one, or skips a blank between two different tokens (Graves et al.,
2006; the same recursion as torchaudio.functional.forced_align). Viterbi over the frames, then a
walk back, gives each token its frames.
"""

from __future__ import annotations

import numpy as np


def forced_align(log_probs: np.ndarray, tokens: list[int], blank: int) -> list[tuple[int, int]]:
    """Frames [first, last + 1) of each token on the best path through `log_probs` [T, vocab]; ValueError when
    the frames are too few for the tokens (each token needs a frame, and one more between two equal tokens)."""
    frames = log_probs.shape[0]
    if not tokens:
        return []
    states = np.full(2 * len(tokens) + 1, blank, dtype=np.int64)
    states[1::2] = tokens
    needed = len(tokens) + sum(1 for a, b in zip(tokens, tokens[1:], strict=False) if a == b)
    if frames < needed:
        raise ValueError(f"{frames} frames cannot hold {len(tokens)} tokens")
    count = len(states)
    skip = np.zeros(count, dtype=bool)  # state s may be reached from s - 2
    skip[2:] = (states[2:] != blank) & (states[2:] != states[:-2])
    emit = log_probs[:, states]  # [T, states]
    score = np.full(count, -np.inf)
    score[:2] = emit[0, :2]
    back = np.zeros((frames, count), dtype=np.int8)  # 0: stayed, 1: from s - 1, 2: from s - 2
    step, jump = np.full(count, -np.inf), np.full(count, -np.inf)
    for t in range(1, frames):
        step[1:] = score[:-1]
        jump[2:] = np.where(skip[2:], score[:-2], -np.inf)
        choice = back[t]
        choice[step > score] = 1  # ties: stay, then step
        best = np.maximum(score, step)
        choice[jump > best] = 2
        score = np.maximum(best, jump) + emit[t]
    state = count - 1 if score[count - 1] >= score[count - 2] else count - 2
    path = np.empty(frames, dtype=np.int64)
    for t in range(frames - 1, -1, -1):
        path[t] = state
        state -= int(back[t, state])  # a Python int: int8 arithmetic (NumPy 2) would overflow past state 127
    spans: list[tuple[int, int]] = []
    for index in range(len(tokens)):
        at = np.flatnonzero(path == 2 * index + 1)
        spans.append((int(at[0]), int(at[-1]) + 1))
    return spans

