"""ChunkStage: decodes each request's frames in chunks as they arrive, many requests per decoder call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from vocalis.stages.chunking import ChunkPolicy, Window
from vocalis.stages.request import SynthesisRequest
from vocalis.stages.stage import StageItem


class ChunkDecoder(Protocol):
    """Frames to waveform (a codec decoder, or flow matching + vocoder)."""

    samples_per_frame: int
    causal: bool
    """True when a frame's samples do not depend on later frames beyond the lookahead,
    so that windows of different lengths can be right-padded into one batch."""

    def decode(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, T, K] frames to [B, T * samples_per_frame] float samples."""
        ...

    # Optional: `context_frames(request) -> Tensor | None`, frames that precede a request's first frame
    # (e.g. the tail of a continuation prompt's audio): decoded as left context, never emitted.


@dataclass
class _Stream:
    request: SynthesisRequest
    frames: list[torch.Tensor] = field(default_factory=list)
    available: int = 0
    emitted: int = 0
    chunks: int = 0
    finished: bool = False
    first_chunk_frames: int | None = None

    def window(self, policy: ChunkPolicy) -> Window | None:
        return policy.next_window(self.emitted, self.available, self.finished, self.chunks, self.first_chunk_frames)

    def frames_between(self, start: int, end: int) -> torch.Tensor:
        if len(self.frames) > 1:
            self.frames = [torch.cat(self.frames)]
        return self.frames[0][start:end]


class ChunkStage:
    def __init__(self, name: str, decoder: ChunkDecoder, policy: ChunkPolicy, max_num_seqs: int = 16) -> None:
        self.name = name
        self.decoder = decoder
        self.policy = policy
        self.max_num_seqs = max_num_seqs
        self._streams: dict[int, _Stream] = {}
        self._batch: list[SynthesisRequest] = []
        self.decode_calls = 0

    def add(self, item: StageItem) -> None:
        stream = self._streams.get(id(item.request))
        if stream is None:
            stream = self._streams[id(item.request)] = _Stream(item.request, first_chunk_frames=_first_chunk(item.request))
            context = self.decoder.context_frames(item.request) if hasattr(self.decoder, "context_frames") else None
            if context is not None and len(context):
                stream.frames.append(context)
                stream.available = stream.emitted = len(context)
            context = _context_frames(item.request)
            if context is not None and len(context):
                stream.frames.append(context)
                stream.available = stream.emitted = len(context)
        if item.payload is not None and len(item.payload):
            stream.frames.append(item.payload)
            stream.available += len(item.payload)
        stream.finished = stream.finished or item.finished

    def has_work(self) -> bool:
        return any(self._ready(stream) for stream in self._streams.values())

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def active_requests(self) -> list[SynthesisRequest]:
        return [stream.request for stream in self._streams.values()]

    def drop(self, request: SynthesisRequest) -> None:
        self._streams.pop(id(request), None)

    def drop_closed(self) -> None:
        for stream in list(self._streams.values()):
            if stream.request.closed:
                self.drop(stream.request)

    def _ready(self, stream: _Stream) -> bool:
        return stream.window(self.policy) is not None or (stream.finished and stream.available == stream.emitted)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        outputs: list[StageItem] = []
        work: list[tuple[_Stream, Window]] = []
        for stream in list(self._streams.values()):
            window = stream.window(self.policy)
            if window is None:
                if stream.finished and stream.available == stream.emitted:
                    outputs.append(StageItem(stream.request, None, finished=True))
                    self.drop(stream.request)
                continue
            if len(work) < self.max_num_seqs:
                work.append((stream, window))
        self._batch = [stream.request for stream, _ in work]
        groups: dict[int | None, list[tuple[_Stream, Window]]] = {}
        for stream, window in work:
            groups.setdefault(None if self.decoder.causal else window.length, []).append((stream, window))
        for group in groups.values():
            outputs.extend(self._decode(group))
        return outputs

    def _decode(self, group: list[tuple[_Stream, Window]]) -> list[StageItem]:
        longest = max(window.length for _, window in group)
        rows = []
        for stream, window in group:
            frames = stream.frames_between(window.context_start, window.lookahead_end)
            if len(frames) < longest:
                pad = frames.new_zeros((longest - len(frames), *frames.shape[1:]))
                frames = torch.cat([frames, pad])
            rows.append(frames)
        samples = self.decoder.decode(torch.stack(rows))
        self.decode_calls += 1
        hop = self.decoder.samples_per_frame
        outputs = []
        for row, (stream, window) in enumerate(group):
            first = (window.start - window.context_start) * hop
            last = (window.end - window.context_start) * hop
            stream.emitted = window.end
            stream.chunks += 1
            done = stream.finished and stream.emitted == stream.available
            outputs.append(StageItem(stream.request, samples[row, first:last].float().cpu().numpy(), finished=done))
            if done:
                self.drop(stream.request)
        return outputs


def _first_chunk(request: SynthesisRequest) -> Any:
    return getattr(request.stage_input, "initial_codec_chunk_frames", None)


def _context_frames(request: SynthesisRequest) -> torch.Tensor | None:
    """Frames [C, K] that precede the request's own (a cloned voice's reference codes): they reach the
    decoder as left context of the first chunks but their samples are never emitted."""
    return getattr(request.stage_input, "codec_context_frames", None)
