"""How much left context the speech-tokenizer decoder would need to re-decode a chunk exactly, measured on the tiny
Base checkpoint (sliding window 72, two layers): a chunk decoded behind k frames against the same samples of the
whole decode.

Behind `receptive_field_frames` (derived here: serving carries state and needs no such bound) the chunk equals the
whole decode; behind the 25 frames the reference's own chunked decode uses it still differs. That is why code2wav
carries a decoder state instead of re-decoding left context (test_codec_stream.py); bench/qwen3_codec_context.py
prints the whole curve, and the same at the published sizes.
"""

import torch

from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.qwen3_tts.config import DecoderConfig

from .goldens import modules
from .test_goldens import WAVE_ATOL

REFERENCE_LEFT_CONTEXT = 25
"""Frames of left context of qwen-tts's `chunked_decode`."""


def receptive_field_frames(c: DecoderConfig) -> int:
    """Frames of left context a frame's samples can depend on (past it, a chunked decode differs)."""
    convs = 2 + sum(6 // ratio + 1 for ratio in c.upsampling_ratios) + 2
    return convs + c.num_hidden_layers * (c.sliding_window - 1)


def chunk_error(k: int, start: int) -> float:
    decoder = modules("base-1b7").decoder
    c = decoder.config
    hop = c.samples_per_frame
    codes = torch.randint(0, c.codebook_size, (1, c.num_quantizers, start + 2), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        whole = decoder(codes)[0, start * hop:]
        part = decoder(codes[:, :, start - k:])[0, k * hop:]
    return float((part - whole).abs().max())


def test_receptive_field_bounds_the_context_and_the_reference_context_is_short_of_it():
    rf = receptive_field_frames(modules("base-1b7").decoder.config)
    start = rf + 8  # frames before the chunk: more than any context tried
    with traced() as path:  # both decodes (the chunk's a part of the whole's path) counted: an overestimate
        exact = chunk_error(rf, start)
    assert exact <= rounding_bound(torch.float32, path.peak, path.steps)  # the bound is exact, up to rounding
    assert REFERENCE_LEFT_CONTEXT < rf
    # measured 1.3e-2 at 25 frames, 2.3e-3 at the sliding window (72), 2e-5 at 140: every frame of context is used
    assert chunk_error(REFERENCE_LEFT_CONTEXT, start) > WAVE_ATOL
    assert chunk_error(REFERENCE_LEFT_CONTEXT - 5, start) > chunk_error(REFERENCE_LEFT_CONTEXT, start)
