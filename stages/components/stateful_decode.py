"""A ChunkDecoder's `decode` for a codec that streams from a per-request state (`causal_stream.StreamState`): each
row's window is decoded from the frames after its state only (the left context the ChunkStage adds is already in
the state, and not decoded again), so a streamed request equals the decode of all its frames at once."""

from __future__ import annotations

from collections.abc import Callable

import torch

from vocalis.stages.components.causal_stream import StreamState
from vocalis.stages.runtime.chunk_stage import DecodeStream

StreamFn = Callable[..., torch.Tensor]
"""(frames [B, L, ...] of each row's next counts[i] frames, right-padded; the rows' states; counts) to samples
[B, L * samples_per_frame], advancing each state past its frames. With `lead_in`, a fourth argument skip: samples
of all but each row's first skip[i] frames, [B, max(counts - skip) * samples_per_frame]."""


def decode_windows(frames: torch.Tensor, streams: list[DecodeStream], samples_per_frame: int, stream: StreamFn,
                   whole: Callable[[torch.Tensor], torch.Tensor], lead_in: bool = False) -> torch.Tensor:
    """frames [B, T, ...] as the ChunkStage passes them (row i from its window's context_start) to samples [B, T *
    samples_per_frame] laid out the same way: each row's window [start, end) decoded from its carried state, the
    rest (context, lookahead, padding: never emitted) zero. Streams without a window (a direct call): `whole(frames)`,
    all the rows' frames decoded at once.

    `lead_in`: a stream's `context_frames` (an ICL clone's reference codes) are decoded into its state with its first
    window, their samples left out (`stream` takes each row's count of them as `skip`). Without it a stream with
    context frames is refused."""
    if any(s.window is None for s in streams):
        return whole(frames)
    rows, skip = [], []
    for row, s in enumerate(streams):
        window = s.window
        lead = frames.new_zeros((0, *frames.shape[2:]))
        if s.state is None:
            s.state = StreamState()
            if s.context_frames is not None and len(s.context_frames):
                if not lead_in:
                    raise ValueError("this decoder takes no context frames")
                lead = s.context_frames.to(frames.device, frames.dtype)
        if s.state.frames + len(lead) != window.start:
            raise ValueError(f"the decoder state is at frame {s.state.frames + len(lead)}, the window starts at {window.start}")
        offset = window.start - window.context_start
        rows.append(torch.cat([lead, frames[row, offset : offset + window.end - window.start]]))
        skip.append(len(lead))
    counts = [len(r) for r in rows]
    longest = max(counts)
    new = torch.stack([torch.cat([r, r.new_zeros((longest - len(r), *r.shape[1:]))]) for r in rows])
    states = [s.state for s in streams]
    samples = stream(new, states, counts, skip) if lead_in else stream(new, states, counts)
    hop = samples_per_frame
    out = samples.new_zeros(len(streams), frames.shape[1] * hop)
    for row, s in enumerate(streams):
        first, n = (s.window.start - s.window.context_start) * hop, (counts[row] - skip[row]) * hop
        out[row, first : first + n] = samples[row, :n]
    return out
