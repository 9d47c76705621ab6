"""ChunkStage: decodes each request's frames in chunks as they arrive, many requests per decoder call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from vocalis.stages.runtime.chunking import ChunkPolicy, Window
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.request_table import RequestTable
from vocalis.stages.runtime.stage import CacheStats, StageItem


@dataclass
class DecodeStream:
    """What a decoder keeps about one request's stream of frames, made once by `ChunkDecoder.start`."""

    first_chunk_frames: int | None = None
    """Frames of the first chunk, overriding the policy's (a request's `initial_codec_chunk_frames`); None: the policy's."""
    context_frames: torch.Tensor | None = None
    """Frames [C, ...] that precede the request's own (a cloned voice's reference codes, the tail of a continuation
    prompt): decoded as left context of the first chunks, never emitted."""
    conditioning: Any = None
    """Per-request inputs of the decoder besides frames (a speaker embedding, a prompt mel), as the decoder defines."""
    state: Any = None
    """What the decoder carries from one chunk of this stream to the next (a vocoder's overlap cache), as it defines."""
    window: Window | None = None
    """The window being decoded (absolute frame positions), set by the ChunkStage before each `decode` call."""


class ChunkDecoder(Protocol):
    """Frames to waveform (a codec decoder, or flow matching + vocoder)."""

    samples_per_frame: int
    causal: bool
    """True when a frame's samples do not depend on later frames beyond the lookahead,
    so that windows of different lengths can be right-padded into one batch."""
    rows_at_once: bool = True
    """Whether `decode` computes its rows together, one call costing less than a call per row. False (a decoder that
    loops over its rows): the stage decodes one row a step, the longest ready first, and never holds a chunk back
    for others, so a request's audio leaves when its own row is done rather than after the others'."""

    def start(self, request: SynthesisRequest) -> DecodeStream:
        """The decode stream of a new request (on the stage's thread; may raise: that request fails alone)."""
        ...

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        """[B, T, ...] frames to [B, T * samples_per_frame] float samples; streams[i] is row i's stream
        (its conditioning to read, its state to update)."""
        ...

    def caches(self) -> dict[str, CacheStats]:
        """The decoder's caches of reusable work by name (read from the metrics' thread); none by default."""
        return {}


@dataclass
class _Frames:
    """The frames of one request, and how far they have been decoded."""

    request: SynthesisRequest
    stream: DecodeStream
    frames: list[torch.Tensor] = field(default_factory=list)
    available: int = 0
    emitted: int = 0
    chunks: int = 0
    finished: bool = False
    changed: bool = True
    """Frames came in or a chunk was decoded since `window` was last worked out."""
    ready_since: float | None = None
    """When the next window became ready to decode (time.monotonic), None while it is not."""
    _window: Window | None = None

    def window(self, policy: ChunkPolicy) -> Window | None:
        """The next window to decode (None until more frames arrive), worked out again only after a change: the
        worker asks about every request it holds several times a step."""
        if self.changed:
            self._window = policy.next_window(self.emitted, self.available, self.finished, self.chunks,
                                              self.stream.first_chunk_frames)
            self.changed = False
            if self._window is None:
                self.ready_since = None
            elif self.ready_since is None:
                self.ready_since = time.monotonic()
        return self._window

    def frames_between(self, start: int, end: int) -> torch.Tensor:
        if len(self.frames) > 1:
            self.frames = [torch.cat(self.frames)]
        return self.frames[0][start:end]


class ChunkStage(RequestTable[_Frames]):
    def __init__(self, name: str, decoder: ChunkDecoder, policy: ChunkPolicy, max_num_seqs: int = 16,
                 device: str | torch.device = "cpu") -> None:
        super().__init__()
        self.name = name
        self.decoder = decoder
        self.policy = policy
        self.max_num_seqs = max_num_seqs
        self.decode_calls = 0
        self._wake_at: float | None = None
        device = torch.device(device)
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        """On CUDA the decoder runs on a stream of its own, so its kernels overlap the talker's (which keeps the
        default stream) on the device as well as on the host threads. None elsewhere."""

    def add(self, item: StageItem) -> None:
        entry = self._entry(item.request)
        if entry is None:
            entry = self._put(_Frames(item.request, self.decoder.start(item.request)))
            context = entry.stream.context_frames
            if context is not None and len(context):
                entry.frames.append(context)
                entry.available = entry.emitted = len(context)
        if item.payload is not None and len(item.payload):
            entry.frames.append(item.payload)
            entry.available += len(item.payload)
        entry.finished = entry.finished or item.finished
        entry.changed = True

    def caches(self) -> dict[str, CacheStats]:
        return self.decoder.caches()

    def has_work(self) -> bool:
        """Whether a step would decode (or finish) something now. A ready chunk that is neither its request's first
        nor its last is held back while fewer than half of the unfinished requests have one ready, up to the policy's
        `max_hold_s` (then `wake_in` says when to ask again): the step then decodes them in one call."""
        self._wake_at = None
        hold = self.policy.max_hold_s if self.decoder.rows_at_once else 0.0
        ready = unfinished = 0
        oldest = float("inf")
        for entry in self._entries.values():
            window = entry.window(self.policy)
            if window is None:
                if entry.finished:
                    if entry.available == entry.emitted:
                        return True
                else:
                    unfinished += 1
                continue
            if hold <= 0 or entry.finished or entry.chunks == 0:
                return True  # first audio, or a request's end: at once
            ready += 1
            unfinished += 1
            oldest = min(oldest, entry.ready_since or 0.0)
        if not ready:
            return False
        if 2 * ready >= unfinished or time.monotonic() - oldest >= hold:
            return True
        self._wake_at = oldest + hold
        return False

    def wake_in(self) -> float | None:
        """Seconds until a chunk held by the last `has_work()` is due, None if none is held (the worker's wait)."""
        return None if self._wake_at is None else max(0.0, self._wake_at - time.monotonic())

    def step(self) -> list[StageItem]:
        self.drop_closed()
        outputs: list[StageItem] = []
        work: list[tuple[_Frames, Window]] = []
        for entry in self._each():
            window = entry.window(self.policy)
            if window is None:
                if entry.finished and entry.available == entry.emitted:
                    outputs.append(StageItem(entry.request, None, finished=True))
                    self.drop(entry.request)
                continue
            if len(work) < self.max_num_seqs:
                work.append((entry, window))
        if work and not self.decoder.rows_at_once:
            work = [min(work, key=lambda item: item[0].ready_since or 0.0)]
        self._batch = [entry.request for entry, _ in work]
        groups: dict[int | None, list[tuple[_Frames, Window]]] = {}
        for entry, window in work:
            groups.setdefault(None if self.decoder.causal else window.length, []).append((entry, window))
        for group in groups.values():
            outputs.extend(self._decode(group))
        return outputs

    def _run(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        if self.stream is None:
            return self.decoder.decode(frames, streams)
        # frames may still be in flight on the producer's stream: order after what it has queued so far
        self.stream.wait_stream(torch.cuda.default_stream(self.stream.device))
        with torch.cuda.stream(self.stream):
            samples = self.decoder.decode(frames, streams)
        self.stream.synchronize()  # the samples leave for the host right after
        return samples

    def _decode(self, group: list[tuple[_Frames, Window]]) -> list[StageItem]:
        longest = max(window.length for _, window in group)
        rows = []
        for entry, window in group:
            frames = entry.frames_between(window.context_start, window.lookahead_end)
            if len(frames) < longest:
                pad = frames.new_zeros((longest - len(frames), *frames.shape[1:]))
                frames = torch.cat([frames, pad])
            rows.append(frames)
            entry.stream.window = window
        samples = self._run(torch.stack(rows), [entry.stream for entry, _ in group])
        self.decode_calls += 1
        hop = self.decoder.samples_per_frame
        outputs = []
        for row, (entry, window) in enumerate(group):
            first = (window.start - window.context_start) * hop
            last = (window.end - window.context_start) * hop
            entry.emitted = window.end
            entry.chunks += 1
            entry.changed = True
            entry.ready_since = None
            done = entry.finished and entry.emitted == entry.available
            outputs.append(StageItem(entry.request, samples[row, first:last].float().cpu().numpy(), finished=done))
            if done:
                self.drop(entry.request)
        return outputs
