"""The audio tokenizer's decoder (Voxtral's codec stage) streams from a carried state: on the tiny checkpoint, a
request longer than the old fixed left context (25 frames) streams, in chunks of any size, the samples of its whole
decode while the decoder is given only each chunk's new frames (its first convolutions pad a first chunk by
replicating / reflecting it, as the whole decode does); requests decoded together in shared calls stay independent,
and the carried state (convolution inputs, overlap tails, each attention layer's keys and values over its window)
stays the same size however long the request."""

from __future__ import annotations

import pytest
import torch

from tests.stages.chunk_feed import carried_sizes, decode_in_calls, feed, record_streams
from tests.tolerance import rounding_bound, traced
from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
from vocalis.stages.runtime.chunking import ChunkPolicy

from .test_generation import random_frames

FRAMES = 30


def exact(tiny, frames: torch.Tensor) -> float:
    """A stream against the whole decode: the same layers over other lengths, which the kernels may block and round
    differently. float32 over the decode's path (traced), at the magnitude of the samples compared: the decoder is
    well-conditioned (a float32 decode of 30 frames is 1.8e-6 off a float64 one, a fifteenth of this bound)."""
    with torch.inference_mode(), traced() as path:
        samples = tiny.modules.codec(frames[None])[0]
    return rounding_bound(torch.float32, float(samples.abs().max()), path.steps)


@pytest.fixture(scope="module")
def long_request(tiny) -> tuple[torch.Tensor, torch.Tensor]:
    frames = random_frames(FRAMES, seed=3)
    with torch.inference_mode():
        return frames, tiny.modules.codec(frames[None])[0]


@pytest.mark.parametrize(("first", "chunk", "growth", "sizes"), [
    (1, 1, 1.0, [1] * FRAMES),
    (3, 2, 1.6, [3, 2, 3, 5, 8, 9]),  # uneven: growing chunks, the last cut short by the end
])
def test_a_long_request_streams_its_whole_decode_from_new_frames_only(tiny, long_request, monkeypatch, first, chunk, growth, sizes):
    frames, expected = long_request
    policy = ChunkPolicy(first_chunk_frames=first, chunk_frames=chunk, left_context_frames=0, growth=growth, max_chunk_frames=25)
    calls = record_streams(monkeypatch, tiny.modules.codec)
    (audio,) = feed(StatefulCodecDecoder(tiny.modules.codec, tiny.modules.codec.args.samples_per_frame), policy, [frames])
    assert calls == [[n] for n in sizes]
    assert audio.shape == expected.shape
    assert float((audio - expected).abs().max()) <= exact(tiny, frames)  # measured 1.2e-6


def test_batched_requests_stay_independent(tiny):
    """Three requests at different positions decoded in shared calls, rows of different lengths right-padded: each
    streams its own whole decode, which is what each streams alone (the test above)."""
    cases = [random_frames(26, seed=5), random_frames(9, seed=6), random_frames(13, seed=7)]
    calls = [[5, 0, 0], [3, 2, 0], [7, 1, 6], [11, 6, 2], [0, 0, 5]]
    together = decode_in_calls(StatefulCodecDecoder(tiny.modules.codec, tiny.modules.codec.args.samples_per_frame), cases, calls)
    with torch.inference_mode():
        for frames, audio in zip(cases, together, strict=True):
            assert float((audio - tiny.modules.codec(frames[None])[0]).abs().max()) <= exact(tiny, frames)


def test_the_carried_state_stays_bounded(tiny):
    state, sizes = carried_sizes(StatefulCodecDecoder(tiny.modules.codec, tiny.modules.codec.args.samples_per_frame), random_frames(40, seed=9), 10)
    assert state.state.frames == 40
    assert len(set(sizes)) == 1  # the same after 10 frames as after 40
    first = tiny.modules.codec.decoder_blocks[1].layers[0].attention
    keys, values = state.state.carry[first]
    assert keys.shape == values.shape == (1, first.kv_heads, first.window, first.head_dim)
