"""The tensor side of one autoregressive sequence, kept beside its torch-free bookkeeping (sequence.py).

Its prompt and generated-frame embeddings (so any of its positions can be recomputed after a preemption), the frames
it emitted, and how many of them the next stage has been handed: the handover policy, which wakes the next stage
once per chunk it can decode rather than every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.sampling import SamplerState


@dataclass(eq=False)
class SequenceTensors:
    """The tensor side of one sequence, kept beside its torch-free bookkeeping."""

    prompt: torch.Tensor
    """[P, H] prompt embeddings."""
    sampler: SamplerState
    state: Any = None
    """The model's own per-sequence state (SequenceStart.state)."""
    max_frames: int = 0
    frames: torch.Tensor | None = None
    """[max_frames, K] buffer of the emitted frames (made with the first); rows 0..num_frames-1 are in use."""
    num_frames: int = 0
    released: int = 0
    """Frames handed to the next stage so far."""
    boundary: int = 0
    """Frames covered by the next stage's chunks so far (see `chunk_due`)."""
    chunks: int = 0
    due_at: int = 0
    """Frames at which the next chunk is due (0 until first asked)."""
    frame_embeds: list[tuple[torch.Tensor, int]] = field(default_factory=list)
    """Input embedding of generated frame j, the input at position P + j, as (a step's [B, H] embeddings, row): kept
    for recompute after preemption and sliced only then, so a step stores them without a torch call per sequence."""

    def inputs(self, start: int, count: int) -> torch.Tensor:
        """Input embeddings [count, H] of positions start..start+count-1."""
        prompt_len = self.prompt.shape[0]
        parts = []
        if start < prompt_len:
            parts.append(self.prompt[start : min(start + count, prompt_len)])
        first = max(start, prompt_len) - prompt_len
        last = start + count - prompt_len
        if last > first:
            parts.extend(embeds[row : row + 1] for embeds, row in self.frame_embeds[first:last])
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def append_frame(self, frame: torch.Tensor) -> None:
        """Record emitted frame [K] (written in place: no copy of the history per step)."""
        if self.frames is None:
            self.frames = frame.new_empty((self.max_frames, *frame.shape))
        self.frames[self.num_frames] = frame
        self.num_frames += 1

    def history(self) -> torch.Tensor:
        """[n, K] frames emitted so far (a view)."""
        if self.frames is None:
            return torch.empty(0, 0, dtype=torch.long, device=self.prompt.device)
        return self.frames[: self.num_frames]

    def chunk_due(self, policy: ChunkPolicy, first: int | None) -> bool:
        """Whether the next stage, chunking by `policy` (its first chunk `first` frames, None: the policy's), can
        decode a new chunk of these frames now: frames are handed over once per chunk, not every step."""
        due = False
        while True:
            size = policy.chunk_size(self.chunks, first)
            if self.num_frames - self.boundary < size + policy.lookahead_frames:
                break
            self.boundary += size
            self.chunks += 1
            due = True
        self.due_at = self.boundary + size + policy.lookahead_frames
        return due

    def release(self, frame: torch.Tensor) -> torch.Tensor:
        """The frames not yet handed over, [n, K] (n may be 0; `frame` [1, K] gives the shape when none exist)."""
        if self.frames is None:
            return frame[:0]
        pending = self.frames[self.released : self.num_frames].clone()
        self.released = self.num_frames
        return pending
