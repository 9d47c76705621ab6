"""The rules stages/components/causal_stream.py adds for the streamed codecs beyond zero-padded convolutions: a replicate- or
reflect-padded causal convolution streams its whole run (its first chunk padded from its own front), rows of
different lengths in one call included; a first chunk too short to reflect is refused."""

from __future__ import annotations

import pytest
import torch

from tests.tolerance import rounding_bound, traced
from vocalis.stages.components.causal_stream import CausalStream
from vocalis.stages.layers.audio_blocks import CausalConv1d


@pytest.mark.parametrize("mode", ["replicate", "reflect"])
def test_a_padded_convolution_streams_its_whole_run(mode):
    torch.manual_seed(0)
    conv = CausalConv1d(3, 4, 5, dilation=2, pad_mode=mode)  # 8 samples of left padding
    x = torch.randn(2, 3, 40)
    with torch.inference_mode():
        with traced() as path:
            whole = conv(x)
        rows: list[dict] = [{}, {}]
        done, pieces = [0, 0], [[], []]
        for sizes in ([9, 12], [1, 3], [20, 5], [10, 20]):  # rows of different lengths in each call
            longest = max(sizes)
            batch = torch.stack([torch.nn.functional.pad(x[i, :, done[i] : done[i] + n], (0, longest - n)) for i, n in enumerate(sizes)])
            out = CausalStream(rows, sizes).run(conv, batch)
            for i, n in enumerate(sizes):
                pieces[i].append(out[i, :, :n])
                done[i] += n
    for i in range(2):
        # one convolution over other lengths: its 15-term sums, at the largest of its inputs, weights and outputs
        torch.testing.assert_close(torch.cat(pieces[i], dim=-1), whole[i], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_a_first_chunk_too_short_to_reflect_is_refused():
    conv = CausalConv1d(1, 1, 7, pad_mode="reflect")
    with pytest.raises(ValueError, match="more than 6 samples"), torch.inference_mode():
        CausalStream([{}], [6]).run(conv, torch.zeros(1, 1, 6))
