"""Fish Audio's modified DAC (the shared codec of S2 Pro and Drama 3) against fish-speech 0.1.0 on the tiny codec
of tests/goldens/fish_speech (made by its make_goldens.py): codes exact, waveform to float32 rounding; chunked decoding with
enough left context equals decoding the whole; strict loading of both weight-norm spellings; every tensor used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.fish_common.fish_dac import CODEC_FILE, FishDAC, load_fish_dac
from vocalis.stages.models.fish_common.fish_dac_config import FishDACConfig

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech"
TINY = GOLDENS / "tiny"


@pytest.fixture(scope="module")
def dac() -> FishDAC:
    return load_fish_dac(TINY)


@pytest.fixture(scope="module")
def golden() -> dict[str, torch.Tensor]:
    return load_file(str(GOLDENS / "dac.safetensors"))


def test_encoder_latents_and_codes_match_the_reference(dac, golden):
    clip = golden["clip"]
    with torch.inference_mode():
        padded = torch.nn.functional.pad(clip, (0, -clip.shape[-1] % dac.samples_per_frame))
        with traced() as path:
            latents = dac.encoder(padded[None, None])[0]
        codes = dac.encode(clip[None])[0]
    torch.testing.assert_close(latents, golden["latents"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
    assert codes.shape == golden["codes"].shape == (10, 14)
    assert torch.equal(codes, golden["codes"])


def test_decoded_waveform_matches_the_reference(dac, golden):
    with torch.inference_mode(), traced() as path:
        audio = dac.decode(golden["codes"][None])[0]
    assert audio.shape == golden["audio"].shape == (14 * 2048,)
    assert (audio - golden["audio"]).abs().max() <= rounding_bound(torch.float32, path.peak, path.steps)
    assert 0.05 < float(audio.std()) < 0.5  # not a degenerate checkpoint


def test_chunked_decode_with_left_context_equals_the_whole(dac, golden):
    """Chunks of 5 frames after 16 frames of left context (more than the reach of the post-transformer, two layers
    of 4-frame windows, plus the convolutions'), their context samples dropped, concatenate to the whole decode.
    Not bit-exact: a chunk's positions restart at 0 and the reference's bfloat16 RoPE table is not exactly
    shift-invariant (1.5e-4 on these codes, the same in float64)."""
    codes = torch.cat([golden["codes"], golden["codes"].flip(-1)[:, :8]], dim=-1)[None]  # 22 frames
    spf, context, chunk = dac.samples_per_frame, 16, 5
    with torch.inference_mode():
        with traced() as path:
            whole = dac.decode(codes)[0]
        pieces = []
        for start in range(0, codes.shape[-1], chunk):
            left = max(0, start - context)
            out = dac.decode(codes[..., left:start + chunk])[0]
            pieces.append(out[(start - left) * spf:])
    streamed = torch.cat(pieces)
    assert streamed.shape == whole.shape
    # The table's part is no rounding of ours: a property of the bfloat16 table, the same on any CPU (and in float64:
    # 1.46e-4). Ours adds float32 rounding, at the samples' magnitude (the decoder is well-conditioned,
    # test_fish_dac_stream.py's `exact`).
    table = 1.5e-4
    assert (streamed - whole).abs().max() <= table + rounding_bound(torch.float32, float(whole.abs().max()), path.steps)


def test_codec_file_mixes_both_weight_norm_spellings_and_loads_strictly(tmp_path):
    state = torch.load(str(TINY / CODEC_FILE), map_location="cpu", weights_only=True)
    assert any(k.endswith("parametrizations.weight.original0") for k in state)  # the causal convolutions
    assert any(k.endswith(".weight_g") for k in state)  # the quantisers' projections
    shutil.copy(TINY / "codec_config.json", tmp_path)

    missing = dict(state)
    missing.pop("quantizer.quantizer.quantizers.3.codebook.weight")
    torch.save(missing, str(tmp_path / CODEC_FILE))
    with pytest.raises(ValueError, match="quantizer.quantizer.quantizers.3.codebook.weight"):
        load_fish_dac(tmp_path)

    torch.save({**state, "decoder.model.9.conv.bias": torch.zeros(1)}, str(tmp_path / CODEC_FILE))
    with pytest.raises(ValueError, match="decoder.model.9.conv.bias"):
        load_fish_dac(tmp_path)

    torch.save({"generator": state}, str(tmp_path / CODEC_FILE))  # a training checkpoint's generator part
    assert isinstance(load_fish_dac(tmp_path), FishDAC)
    torch.save({f"generator.{k}": v for k, v in state.items()}, str(tmp_path / CODEC_FILE))  # ... as a prefix
    assert isinstance(load_fish_dac(tmp_path), FishDAC)


def test_the_published_geometry_is_the_default():
    c = FishDACConfig()
    assert (c.sample_rate, c.samples_per_frame, c.num_codebooks, c.latent_dim) == (44100, 2048, 10, 1024)
    assert FishDACConfig.for_checkpoint(TINY).samples_per_frame == 2048


def test_every_tensor_matters(golden):
    """Every tensor changes what the codec computes: the encoder on a clip, the quantiser's encoding path, each
    quantiser stage, the quantiser's decoding path and the decoder on fixed codes. One backward pass finds the
    tensors the outputs depend on smoothly; the rest (the quantisers' input projections, which act only through
    the nearest-code choice) must change the chosen codes or their vectors when perturbed."""
    dac = load_fish_dac(TINY)  # its own copy: gradients are taken
    clip, codes = golden["clip"][: 2048 * 2][None, None], golden["codes"][None, :, :2]
    q = dac.quantizer
    stages = [*q.semantic_quantizer.quantizers, *q.quantizer.quantizers]
    with torch.inference_mode():
        whole = q.pre_module(q.downsample(dac.encoder(golden["clip"][None, None])))

    def outputs() -> list[torch.Tensor]:
        z = q.pre_module(q.downsample(dac.encoder(clip)))
        outs = [z, dac.decode(codes)]
        for stage in stages:
            index, z_q = stage.quantize(z)
            outs += [z_q, stage.codebook(index), stage.decode(codes[:, 0] % 32)]
        return outs

    generator = torch.Generator().manual_seed(0)
    total = sum((out * torch.randn(out.shape, generator=generator)).sum() for out in outputs())
    total.backward()
    flat = [name for name, p in dac.named_parameters() if p.grad is None or not bool(p.grad.abs().sum() > 0)]

    def chosen() -> torch.Tensor:
        return torch.cat([torch.cat([index.flatten().float(), z_q.flatten()])
                          for index, z_q in (stage.quantize(whole) for stage in stages)])

    with torch.inference_mode():
        base = chosen()
        dead = []
        params = dict(dac.named_parameters())
        for name in flat:
            tensor = params[name]
            saved = tensor.detach().clone()
            tensor.data.add_(0.2 * saved.std() + 0.05)
            if torch.equal(chosen(), base):
                dead.append(name)
            tensor.data.copy_(saved)
    assert all(".in_proj." in name for name in flat)  # only these act through the code choice alone
    assert dead == []
    assert {name for name, _ in dac.named_buffers()} == set()  # nothing else is loaded
