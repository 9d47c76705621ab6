"""A ChunkDecoder's `decode` for a codec that streams from a per-request state (`causal_stream.StreamState`): each
row's window is decoded from the frames after its state only (the left context the ChunkStage adds is already in
the state, and not decoded again), so a streamed request equals the decode of all its frames at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from vocalis.stages.causal_stream import StreamState
from vocalis.stages.chunk_stage import DecodeStream

StreamFn = Callable[[torch.Tensor, Sequence[StreamState], Sequence[int]], torch.Tensor]
"""(frames [B, L, ...] of each row's next counts[i] frames, right-padded; the rows' states; counts) to samples
[B, L * samples_per_frame], advancing each state past its frames."""


def decode_windows(frames: torch.Tensor, streams: list[DecodeStream], samples_per_frame: int, stream: StreamFn) -> torch.Tensor:
    """frames [B, T, ...] as the ChunkStage passes them (row i from its window's context_start) to samples [B, T *
    samples_per_frame] laid out the same way: each row's window [start, end) decoded from its carried state, the
    rest (context, lookahead, padding: never emitted) zero."""
    rows = []
    for row, s in enumerate(streams):
        window = s.window
        if s.state is None:
            s.state = StreamState()
        if s.state.frames != window.start:
            raise ValueError(f"the decoder state is at frame {s.state.frames}, the window starts at {window.start}")
        offset = window.start - window.context_start
        rows.append(frames[row, offset : offset + window.end - window.start])
    counts = [len(r) for r in rows]
    longest = max(counts)
    new = torch.stack([torch.cat([r, r.new_zeros((longest - len(r), *r.shape[1:]))]) for r in rows])
    samples = stream(new, [s.state for s in streams], counts)
    hop = samples_per_frame
    out = samples.new_zeros(len(streams), frames.shape[1] * hop)
    for row, s in enumerate(streams):
        first = (s.window.start - s.window.context_start) * hop
        out[row, first : first + counts[row] * hop] = samples[row, : counts[row] * hop]
    return out
