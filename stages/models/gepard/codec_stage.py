"""NanoCodec as the ChunkDecoder of Gepard's second stage: frames [B, T, 32] of FSQ codes to 22.05 kHz samples."""

from __future__ import annotations

import torch

from vocalis.stages.components.stateful_decode import decode_windows
from vocalis.stages.models.gepard.nanocodec import NanoCodec
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.request import SynthesisRequest


class NanoCodecDecoder(ChunkDecoder):
    """Each request's chunks are decoded from its carried codec state (`NanoCodec.stream`): a streamed request equals
    the decode of all its frames at once, and a chunk costs its own frames (the window's left context is not read)."""

    causal = True

    def __init__(self, codec: NanoCodec) -> None:
        self.codec = codec
        self.samples_per_frame = codec.samples_per_frame

    def start(self, request: SynthesisRequest) -> DecodeStream:
        return DecodeStream()

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        device = next(self.codec.parameters()).device
        return decode_windows(frames, streams, self.samples_per_frame,
                              lambda codes, states, counts: self.codec.stream(codes.to(device), states, counts),
                              lambda codes: self.codec(codes.to(device)))
