"""When a chunked decoder may decode, and which frames: the chunking policy, without tensors.

Frames arrive one by one from the stage before. A chunk is decoded once enough
new frames (plus lookahead) are there, or the input is finished; the decoder sees
`left_context` frames before the chunk so that the chunk's samples match a
whole-sequence decode, and only the chunk's own samples are emitted. The first
chunk is small (low time to first audio); later ones grow up to a maximum.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """Frames [context_start, lookahead_end) go to the decoder; samples of [start, end) are emitted."""

    context_start: int
    start: int
    end: int
    lookahead_end: int

    @property
    def length(self) -> int:
        return self.lookahead_end - self.context_start


@dataclass(frozen=True)
class ChunkPolicy:
    first_chunk_frames: int = 1
    chunk_frames: int = 25
    left_context_frames: int = 25
    lookahead_frames: int = 0
    growth: float = 1.0
    """Each chunk after the second is this many times the one before (1: fixed size)."""
    max_chunk_frames: int = 100
    max_hold_s: float = 0.0
    """How long a ready chunk that is neither its request's first nor its last may wait for other requests' chunks,
    so that one decoder call covers more requests (ChunkStage.has_work). 0: decoded at once."""

    def __post_init__(self) -> None:
        if self.first_chunk_frames < 1 or self.chunk_frames < 1:
            raise ValueError("chunk sizes must be >= 1 frame")
        if self.left_context_frames < 0 or self.lookahead_frames < 0:
            raise ValueError("context and lookahead must be >= 0")
        if self.growth < 1.0:
            raise ValueError("growth must be >= 1")
        if self.max_hold_s < 0:
            raise ValueError("max_hold_s must be >= 0")

    def chunk_size(self, index: int, first_chunk_frames: int | None = None) -> int:
        if index == 0:
            return first_chunk_frames or self.first_chunk_frames
        size = round(self.chunk_frames * self.growth ** (index - 1))
        return max(1, min(size, max(self.max_chunk_frames, self.chunk_frames)))

    def next_window(
        self, emitted: int, available: int, finished: bool, index: int, first_chunk_frames: int | None = None
    ) -> Window | None:
        """The next chunk to decode, or None until more frames arrive."""
        size = self.chunk_size(index, first_chunk_frames)
        if available - emitted >= size + self.lookahead_frames:
            end = emitted + size
        elif finished and available > emitted:
            end = available
        else:
            return None
        return Window(
            context_start=max(0, emitted - self.left_context_frames),
            start=emitted,
            end=end,
            lookahead_end=min(available, end + self.lookahead_frames),
        )
