"""Stage 1 of Voxtral TTS: frames of codes to 24 kHz audio with the audio tokenizer's decoder, in chunks as they
arrive. The decoder is causal: each request's chunks are decoded from its carried decoder state
(`AudioTokenizerDecoder.stream`), so a streamed request equals the decode of all its frames at once and a chunk costs
its own frames (the window's left context is not read)."""

from __future__ import annotations

import torch

from vocalis.stages.components.stateful_decode import decode_windows
from vocalis.stages.models.voxtral.codec import AudioTokenizerDecoder
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.request import SynthesisRequest


class CodecDecoder(ChunkDecoder):
    causal = True

    def __init__(self, codec: AudioTokenizerDecoder) -> None:
        self.codec = codec
        self.samples_per_frame = codec.args.samples_per_frame
        self.device = next(codec.parameters()).device

    def start(self, request: SynthesisRequest) -> DecodeStream:
        return DecodeStream()  # Voxtral takes no initial_codec_chunk_frames: the policy's first chunk

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        return decode_windows(frames, streams, self.samples_per_frame,
                              lambda codes, states, counts: self.codec.stream(codes.to(self.device), states, counts),
                              lambda codes: self.codec(codes.to(self.device)))
