"""The Fish DAC (S2 Pro's and Drama 3's codec stage) streams from a carried state: on the tiny codec of
tests/goldens/fish_speech, a request longer than the old fixed left context (25 frames) streams, in chunks of any
size, the samples of its whole decode while the codec is given only each chunk's new frames; requests batched
together stay independent, and the carried state (convolution inputs, overlap tails, the post-transformer's keys and
values over its window) stays the same size however long the request."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.stages.chunk_feed import carried_sizes, decode_in_calls, feed, one_torch_thread, record_streams  # noqa: F401 (a fixture)
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.fish_common.codec import dac_decoder
from vocalis.stages.models.fish_common.fish_dac import FishDAC, load_fish_dac
from vocalis.stages.runtime.chunk_stage import DecodeStream
from vocalis.stages.runtime.chunking import ChunkPolicy, Window

TINY = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech" / "tiny"
FRAMES = 28
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def dac() -> FishDAC:
    return load_fish_dac(TINY)


def codes(dac: FishDAC, count: int, seed: int) -> torch.Tensor:
    """Frames [count, 10] as the talker emits them."""
    c, g = dac.config, torch.Generator().manual_seed(seed)
    semantic = torch.randint(0, c.semantic_codebook_size, (count, 1), generator=g)
    return torch.cat([semantic, torch.randint(0, c.codebook_size, (count, c.n_codebooks), generator=g)], dim=1)


def whole(dac: FishDAC, frames: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return dac.decode(frames.T[None])[0]


def exact(dac: FishDAC, frames: torch.Tensor) -> float:
    """A stream against the whole decode: the same layers over other lengths, which the kernels may block and round
    differently. float32 over the decode's path (traced), at the magnitude of the samples compared: the decoder is
    well-conditioned (a float32 decode of 28 frames is 2.7e-6 off a float64 one, a ninth of this bound)."""
    with traced() as path:
        samples = whole(dac, frames)
    return rounding_bound(torch.float32, float(samples.abs().max()), path.steps)


@pytest.fixture(scope="module")
def long_request(dac) -> tuple[torch.Tensor, torch.Tensor]:
    """A request's frames and their whole decode."""
    frames = codes(dac, FRAMES, 1)
    return frames, whole(dac, frames)


@pytest.mark.parametrize(("first", "chunk", "growth", "context", "sizes"), [
    (1, 1, 1.0, 0, [1] * FRAMES),
    (3, 2, 1.6, 0, [3, 2, 3, 5, 8, 7]),  # uneven: growing chunks, the last cut short by the end
    (4, 25, 1.0, 25, [4, 24]),  # a configured left context is in the state already: not decoded again
])
def test_a_long_request_streams_its_whole_decode_from_new_frames_only(dac, long_request, monkeypatch, first, chunk, growth, context, sizes):
    frames, expected = long_request
    policy = ChunkPolicy(first_chunk_frames=first, chunk_frames=chunk, left_context_frames=context, growth=growth, max_chunk_frames=25 if context else 8)
    calls = record_streams(monkeypatch, dac)
    (audio,) = feed(dac_decoder(dac), policy, [frames])
    assert calls == [[n] for n in sizes]  # the codec is given each chunk's new frames only
    assert audio.shape == expected.shape
    assert float((audio - expected).abs().max()) <= exact(dac, frames)  # measured 3.8e-6 (float32 convolutions of other lengths)


def test_batched_requests_stay_independent(dac):
    """Three requests at different positions decoded in shared calls, rows of different lengths right-padded: each
    streams its own whole decode, which is what each streams alone (the test above)."""
    cases = [codes(dac, 26, 5), codes(dac, 9, 6), codes(dac, 13, 7)]
    calls = [[5, 0, 0], [3, 2, 0], [7, 1, 6], [11, 6, 2], [0, 0, 5]]
    together = decode_in_calls(dac_decoder(dac), cases, calls)
    for frames, audio in zip(cases, together, strict=True):
        assert float((audio - whole(dac, frames)).abs().max()) <= exact(dac, frames)


def test_the_carried_state_stays_bounded(dac):
    state, sizes = carried_sizes(dac_decoder(dac), codes(dac, 40, 9), 10)
    assert state.state.frames == 40
    assert len(set(sizes)) == 1  # the same after 10 frames as after 40
    window = dac.config.quantizer_window
    keys, values = state.state.carry[dac.quantizer.post_module.layers[0].attention]
    assert keys.shape == values.shape == (1, dac.config.quantizer_heads, window - 1, dac.config.quantizer_head_dim)


def test_a_window_that_skips_frames_is_refused(dac):
    state = DecodeStream(window=Window(4, 4, 8, 8))  # the state has decoded nothing, the window starts at frame 4
    with pytest.raises(ValueError, match="starts at 4"), torch.inference_mode():
        dac_decoder(dac).decode(codes(dac, 4, 10)[None], [state])
