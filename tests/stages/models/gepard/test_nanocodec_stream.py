"""NanoCodec (Gepard's codec stage) streams from a carried state: on the tiny `.nemo` codec, a request longer than
the old fixed left context (25 frames) streams, in chunks of any size, the samples of its whole decode while the
codec is given only each chunk's new frames; requests decoded together in shared calls stay independent, and the
carried state (each convolution's last inputs, each transposed convolution's overlap tail) stays the same size."""

from __future__ import annotations

import pytest
import torch

from tests.stages.chunk_feed import carried_sizes, decode_in_calls, feed, one_torch_thread, record_streams  # noqa: F401 (a fixture)
from tests.tiny_gepard.build import build_nemo
from tests.tolerance import rounding_bound, traced
from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
from vocalis.stages.models.gepard.nanocodec import NanoCodec, load_nanocodec
from vocalis.stages.runtime.chunking import ChunkPolicy

FRAMES = 30
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def codec(tmp_path_factory) -> NanoCodec:
    return load_nanocodec(build_nemo(tmp_path_factory.mktemp("nano") / "tiny.nemo"))


def codes(count: int, seed: int) -> torch.Tensor:
    """Frames [count, 32] of per-dimension FSQ codes."""
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, levels, (count,), generator=g) for levels in [8, 7, 6, 6] * 8], dim=-1)


def whole(codec: NanoCodec, frames: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return codec(frames[None])[0]


def exact(codec: NanoCodec, frames: torch.Tensor) -> float:
    """A stream against the whole decode: the same layers over other lengths, which the kernels may block and round
    differently. float32 over the decode's path (traced), at the magnitude of the samples compared: the decoder is
    well-conditioned (a float32 decode of 30 frames is 2.8e-6 off a float64 one, a fifth of this bound)."""
    with traced() as path:
        samples = whole(codec, frames)
    return rounding_bound(torch.float32, float(samples.abs().max()), path.steps)


@pytest.mark.parametrize(("first", "chunk", "growth", "context", "sizes"), [
    (1, 1, 1.0, 0, [1] * FRAMES),
    (3, 2, 1.6, 0, [3, 2, 3, 5, 8, 9]),  # uneven: growing chunks, the last cut short by the end
    (10, 43, 1.0, 25, [10, 20]),  # the deployed chunks; a configured left context is in the state: not decoded again
])
def test_a_long_request_streams_its_whole_decode_from_new_frames_only(codec, monkeypatch, first, chunk, growth, context, sizes):
    frames = codes(FRAMES, 1)
    policy = ChunkPolicy(first_chunk_frames=first, chunk_frames=chunk, left_context_frames=context, growth=growth, max_chunk_frames=43)
    calls = record_streams(monkeypatch, codec)
    (audio,) = feed(StatefulCodecDecoder(codec, codec.samples_per_frame), policy, [frames])
    assert calls == [[n] for n in sizes]
    expected = whole(codec, frames)
    assert audio.shape == expected.shape
    assert float((audio - expected).abs().max()) <= exact(codec, frames)


def test_batched_requests_stay_independent(codec):
    """Three requests decoded in shared calls, rows of different lengths right-padded: each streams its own whole
    decode, which is what each streams alone (the test above)."""
    cases = [codes(40, 5), codes(12, 6), codes(30, 7)]
    calls = [[5, 0, 0], [3, 2, 0], [7, 1, 6], [25, 9, 2], [0, 0, 22]]
    together = decode_in_calls(StatefulCodecDecoder(codec, codec.samples_per_frame), cases, calls)
    for frames, audio in zip(cases, together, strict=True):
        assert float((audio - whole(codec, frames)).abs().max()) <= exact(codec, frames)


def test_the_carried_state_stays_bounded(codec):
    state, sizes = carried_sizes(StatefulCodecDecoder(codec, codec.samples_per_frame), codes(80, 9), 20)
    assert state.state.frames == 80
    assert len(set(sizes)) == 1 and sizes[0] > 0
