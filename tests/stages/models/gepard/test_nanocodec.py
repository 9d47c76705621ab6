"""NanoCodec's decoder from the tiny `.nemo` archive NeMo saved, read without NeMo: the loader's refusals, the FSQ
arithmetic against NeMo's mixed-radix index decode, causality, and chunked decoding with left context reproducing the
whole decode. Its decode against NeMo's own is test_nanocodec_nemo.py.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from tests.tiny_gepard.build import build_nemo
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.gepard.nanocodec import NanoCodecConfig, load_nanocodec, read_nemo


@pytest.fixture(scope="module")
def codec(tmp_path_factory):
    return load_nanocodec(build_nemo(tmp_path_factory.mktemp("nano") / "tiny.nemo"))


def codes(frames: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, levels, (1, frames), generator=g)[0] for levels in [8, 7, 6, 6] * 8], dim=-1)[None]


def test_the_archive_loads_as_data_with_only_the_decoder_used(tmp_path, codec):
    config, weights = read_nemo(build_nemo(tmp_path / "a.nemo"))
    assert config["audio_decoder"]["_target_"].endswith("CausalHiFiGANDecoder")  # parsed, never instantiated
    assert "audio_decoder.res_layers.0.res_blocks.1.res_blocks.1.input_conv.conv.parametrizations.weight.original1" in weights
    assert "audio_decoder.activations.0.activation.snake_act.alpha" in weights
    with pytest.raises(ValueError, match="surprise"):
        load_nanocodec(build_nemo(tmp_path / "b.nemo", extra={"audio_decoder.surprise": torch.zeros(1)}))
    with pytest.raises(ValueError, match="levels"):
        load_nanocodec(build_nemo(tmp_path / "c.nemo", extra={"vector_quantizer.fsqs.3.num_levels": torch.tensor([8, 8, 6, 6])}))


def test_per_dimension_codes_dequantize_as_nemo_s_group_indices_do(codec):
    frame = codes(5)
    latents = codec.dequantize(frame)[0]  # [32, 5]
    levels = torch.tensor([8, 7, 6, 6])
    base = torch.tensor([1, 8, 56, 336])
    for group in range(8):
        digits = frame[0, :, 4 * group : 4 * group + 4]
        index = (digits * base).sum(-1)  # NeMo's mixed-radix group index
        back = (index[:, None] // base) % levels  # and its decode, digit by digit
        expected = (back - levels // 2) / (levels // 2)
        torch.testing.assert_close(latents[4 * group : 4 * group + 4].T, expected.float())
    torch.testing.assert_close(codec.dequantize(torch.tensor([[[0, 6, 3, 5] * 8]]))[0, :4, 0], torch.tensor([-1.0, 1.0, 0.0, 2 / 3]))


def test_decode_length_range_and_causality(codec):
    frame = codes(12)
    with torch.no_grad():
        with traced() as path:
            audio = codec(frame)
        changed = frame.clone()
        changed[:, 8:] = codes(4, seed=5)
        other = codec(changed)
    assert audio.shape == (1, 12 * 16) and audio.abs().max() <= 1 and audio.std() > 1e-3
    # the same frames decoded within a longer call: other lengths, which the kernels may block and round differently;
    # at the samples' magnitude (well-conditioned: test_nanocodec_stream.py's `exact`)
    tolerance = rounding_bound(torch.float32, float(audio.abs().max()), path.steps)
    torch.testing.assert_close(other[:, : 8 * 16], audio[:, : 8 * 16], atol=tolerance, rtol=0)
    assert (other[:, 8 * 16 :] - audio[:, 8 * 16 :]).abs().max() > 1e-3


def receptive_field_frames(c: NanoCodecConfig) -> int:
    """Frames of left context after which earlier frames no longer change a window's samples (rounded up)."""
    past = (c.in_kernel_size - 1) * c.samples_per_frame  # in output samples
    scale = c.samples_per_frame
    for rate in c.up_sample_rates:
        scale //= rate
        past += rate * scale  # the transposed convolution reaches one input step back
        chain = max(sum((k - 1) * d + (k - 1) for d in c.resblock_dilation_sizes) for k in c.resblock_kernel_sizes)
        past += chain * scale
    past += c.out_kernel_size - 1
    return math.ceil(past / c.samples_per_frame)


def test_chunks_with_left_context_reproduce_the_whole_decode(codec):
    """In float64, so that what is compared is the arithmetic, not float32 rounding over windows of other lengths."""
    codec = copy.deepcopy(codec).double()
    frame = codes(40, seed=3)
    context = receptive_field_frames(codec.audio_decoder.config)
    assert 0 < context < 40
    with torch.no_grad():
        with traced() as path:
            whole = codec(frame)[0]
        parts, start = [], 0
        for size in (3, 7, 11, 19):
            left = max(0, start - context)
            window = codec(frame[:, left : start + size])[0]
            parts.append(window[(start - left) * 16 :])
            start += size
    torch.testing.assert_close(torch.cat(parts), whole, atol=rounding_bound(torch.float64, path.peak, path.steps), rtol=0)


def test_every_decoder_tensor_changes_the_audio(codec):
    params = dict(codec.named_parameters())
    for p in params.values():
        p.grad = None
    audio = codec(codes(6, seed=9))
    (audio * torch.randn(audio.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
    dead = [name for name, p in params.items() if p.grad is None or p.grad.abs().max().item() == 0]
    for p in params.values():
        p.grad = None
    assert not dead, dead
