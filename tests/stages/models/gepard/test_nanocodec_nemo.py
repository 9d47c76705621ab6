"""NanoCodec's decoder against NeMo's own: the tiny `.nemo` archive that `nemo-toolkit[tts]` 3.0.0's AudioCodecModel
saved, and the latents and audio it decoded (tests/goldens/gepard/make_goldens.py, run in a venv of its own), read
by our loader without NeMo. The published sizes are checked by key set against NeMo's classes built at those sizes.

At the published sizes the decode was also compared once by hand (a 250 MB archive, too large to commit):
`make_goldens.py --real /tmp/nemo-real` in the NeMo venv, then load_nanocodec('/tmp/nemo-real/real.nemo') on the
per-dimension digits of real.safetensors' tokens here: 4 frames, max abs difference 0.0 (2026-12-03)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.layers.weights import fold_weight_norm
from vocalis.stages.models.gepard.nanocodec import NanoCodec, NanoCodecConfig, load_nanocodec, read_nemo

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "gepard"
ARCHIVE = GOLDENS / "tiny" / "nemo-nano-codec-tiny.nemo"


@pytest.fixture(scope="module")
def golden() -> dict[str, torch.Tensor]:
    return load_file(str(GOLDENS / "nanocodec.safetensors"))


@pytest.fixture(scope="module")
def codec() -> NanoCodec:
    return load_nanocodec(ARCHIVE)


def test_nemo_s_own_archive_loads_strictly_with_its_structural_options(codec):
    config, weights = read_nemo(ARCHIVE)
    assert config["target"].endswith("AudioCodecModel")
    assert (codec.config.activation, codec.config.output_activation, codec.config.grouped_upsampling) == ("half_snake", "clamp", True)
    used = {"audio_decoder." + k for k in codec.audio_decoder.state_dict()}
    folded = fold_weight_norm(weights)
    assert used == {k for k in folded if k.startswith("audio_decoder.")}
    assert any(k.startswith("discriminator.") for k in weights) and any(k.startswith("audio_encoder.") for k in weights)


def test_a_decoder_of_another_class_with_the_same_tensor_names_is_refused():
    config, _ = read_nemo(ARCHIVE)
    config["audio_decoder"]["_target_"] = "nemo.collections.tts.modules.audio_codec_modules.HiFiGANDecoder"
    with pytest.raises(ValueError, match="needs a CausalHiFiGANDecoder, the archive has .*HiFiGANDecoder"):
        NanoCodecConfig.from_yaml(config)


def test_per_dimension_digits_are_nemo_s_group_tokens(golden):
    digits, tokens = golden["digits"], golden["tokens"]  # [B, T, 32], [B, 8, T]
    base = torch.tensor([1, 8, 56, 336])
    folded = (digits.view(*digits.shape[:2], 8, 4) * base).sum(-1).transpose(1, 2)
    assert torch.equal(folded, tokens)


def test_dequantised_latents_equal_nemo_s_exactly(codec, golden):
    latents = codec.dequantize(golden["digits"])
    assert torch.equal(latents[0], golden["latents"][0])
    short = int(golden["tokens_len"][1])
    assert torch.equal(latents[1, :, :short], golden["latents"][1, :, :short])


def test_decoded_audio_matches_nemo_s(codec, golden):
    with torch.no_grad(), traced() as path:
        audio = codec(golden["digits"])
    expected = golden["audio"]
    assert audio.shape == expected.shape == (2, golden["digits"].shape[1] * 16)
    assert (expected[0].abs() >= 1).any(), "the golden never reaches the clamp"
    # NeMo on the machine that made the golden ran the same convolutions with its kernels (0.0 apart there), and
    # folds the weight norm per call: within the rounding of the decoder's path (float32, its peak activation,
    # every convolution's terms chained), however this CPU's kernels sum them.
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    torch.testing.assert_close(audio[0], expected[0], atol=tolerance, rtol=0)
    valid = int(golden["audio_len"][1])  # NeMo zeroes a shorter sequence's tail; causality keeps the rest
    torch.testing.assert_close(audio[1, :valid], expected[1, :valid], atol=tolerance, rtol=0)
    assert expected[1, valid:].abs().max() == 0


def test_the_published_geometry_has_nemo_s_key_set():
    real = json.loads((GOLDENS / "real_nanocodec_keys.json").read_text())
    with torch.device("meta"):
        codec = NanoCodec(NanoCodecConfig.from_yaml(real["config"]))
    ours = {k: list(v.shape) for k, v in codec.audio_decoder.state_dict().items()}
    nemo = {k: v for k, v in real["audio_decoder"].items()}
    for key in [k for k in nemo if k.endswith("parametrizations.weight.original0")]:
        stem = key.removesuffix("parametrizations.weight.original0")
        nemo.pop(key)
        nemo[stem + "weight"] = nemo.pop(stem + "parametrizations.weight.original1")
    assert ours == nemo
    assert codec.samples_per_frame == 1024 and codec.config.sample_rate == 22050
    assert sum(v.numel() for v in codec.audio_decoder.state_dict().values()) > 31_000_000
