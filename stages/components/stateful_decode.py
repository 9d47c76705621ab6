"""The ChunkDecoder of a codec that streams from a per-request state (`causal_stream.StreamState`): each row's window
is decoded from the frames after its state only (the left context the ChunkStage adds is already in the state, and
not decoded again), so a streamed request equals the decode of all its frames at once. `decode_windows` is the
decode; `StatefulCodecDecoder` the stage model every such codec stage uses (Fish Speech / Drama 3, Gepard, Voxtral,
Qwen3-TTS's code2wav)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import torch

from vocalis.stages.components.causal_stream import StreamState
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.request import SynthesisRequest

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


class StreamingCodec(Protocol):
    """A codec decoder that streams from per-request states: `stream(codes, states, counts)` (with `skip` as a
    fourth argument where it takes reference codes ahead of a request's own, see `StreamFn`)."""

    stream: StreamFn

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...


def _same(frames: torch.Tensor) -> torch.Tensor:
    return frames


class StatefulCodecDecoder(ChunkDecoder):
    """The ChunkDecoder of a codec stage whose codec streams from a per-request state: frames [B, T, ...] to samples
    [B, T * samples_per_frame]. Each request's chunks are decoded from its carried codec state (`decode_windows`), so
    a streamed request equals the decode of all its frames at once and a chunk costs its own frames (the window's
    left context is not read).

    A family gives the codec and what is its own: `codes` maps the stage's frames [B, T, ...] (on the codec's
    device) to what the codec reads (a transpose to [B, K, T], a clamp of padding); `whole` decodes all the frames
    of a direct call at once (default: the codec's forward); `reference_codes` gives a request's codes to decode
    into its state before its own frames, their audio dropped (an ICL clone's reference); `first_chunk` a request's
    own first chunk size (`initial_codec_chunk_frames`)."""

    causal = True

    def __init__(self, codec: StreamingCodec, samples_per_frame: int, *,
                 codes: Callable[[torch.Tensor], torch.Tensor] = _same,
                 whole: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 reference_codes: Callable[[SynthesisRequest], torch.Tensor | None] | None = None,
                 first_chunk: Callable[[SynthesisRequest], int | None] | None = None) -> None:
        self.codec = codec
        self.samples_per_frame = samples_per_frame
        self.codes = codes
        self.whole = whole if whole is not None else codec
        self.reference_codes = reference_codes
        self.first_chunk = first_chunk

    def start(self, request: SynthesisRequest) -> DecodeStream:
        first = None if self.first_chunk is None else self.first_chunk(request)
        context = None if self.reference_codes is None else self.reference_codes(request)
        return DecodeStream(first_chunk_frames=first, context_frames=context)

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        device = next(self.codec.parameters()).device

        def codes(f: torch.Tensor) -> torch.Tensor:
            return self.codes(f.to(device))

        def stream(f: torch.Tensor, states: list[StreamState], counts: list[int], *skip: list[int]) -> torch.Tensor:
            return self.codec.stream(codes(f), states, counts, *skip)

        return decode_windows(frames, streams, self.samples_per_frame, stream, lambda f: self.whole(codes(f)),
                              lead_in=self.reference_codes is not None)
