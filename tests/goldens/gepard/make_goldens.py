"""Build a tiny NanoCodec with NeMo's own `AudioCodecModel` and record its FSQ dequantisation and decoder.

Run by hand, in a venv of its own that has the reference package (never the project's venv, never CI):

    python3 -m venv /tmp/nemo-ref
    /tmp/nemo-ref/bin/pip install torch==2.13.0          # first, so the CPU build is the one kept
    /tmp/nemo-ref/bin/pip install "nemo-toolkit[tts]==3.0.0"
    /tmp/nemo-ref/bin/python tests/goldens/gepard/make_goldens.py
    /tmp/nemo-ref/bin/python tests/goldens/gepard/make_goldens.py --real /tmp/nemo-real   # optional, see real_size_check

nemo-toolkit 3.0.0's pins accept the CPU torch 2.13 and pull no torchaudio; the venv is about 3.3 GB.

The module graph is the published one of `nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps`: the `_target_` classes and
structural options of its model_config.yaml (REAL below, as transcribed in a public analysis of that archive, since
the archive itself is not reachable here): a `CausalHiFiGANDecoder` with half-snake activations, a clamp on the
output, zero padding and grouped upsampling, a `GroupFiniteScalarQuantizer` of 8 groups x [8, 7, 6, 6], and a
non-causal `HiFiGANEncoder` with replicate padding. TINY keeps every structural option and shrinks the sizes
(three upsampling stages instead of five, 16 samples a frame instead of 1024, an odd channel count in the last stage
as the real one has, so half-snake splits unevenly, and residual kernels (3, 5) with dilations (1, 2) instead of
(3, 7, 11) and (1, 3, 5), so that the receptive field stays 17 frames and a short streamed decode still cuts its
left context; the published kernels are checked by key set, below); a small STFT discriminator rides along, as the
real archive has one. This archive is also the one the tiny Gepard checkpoint serves (tests/tiny_gepard/build.py).

It writes, beside itself:
- tiny/nemo-nano-codec-tiny.nemo: the model saved by NeMo's own `save_to` (its model_config.yaml and state dict,
  weight norm as parametrizations), every tensor re-randomised with a seed so no magnitude, bias or snake alpha is
  at its initial value, and the output gain set so that a few samples clip (3 of the first sequence's 192);
- nanocodec.safetensors: a batch of two token sequences ([B, 8 groups, T] group indices, the second one shorter by
  its tokens_len), the per-dimension digits Gepard's heads would emit for them (NeMo's codes_to_nonnegative of its
  own dequantised latents, [B, T, 32]), NeMo's `dequantize` latents [B, 32, T] and `decode` audio [B, T x 16] with
  audio_len;
- real_nanocodec_keys.json: the published structural config (REAL) and every state-dict key and shape of NeMo's
  decoder (on the meta device) and quantizer built at the published sizes, and the encoder's key count.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
SEED = 20261203
FRAMES = 12
SHORT = 9
MODULES = "nemo.collections.tts.modules.audio_codec_modules."

REAL = {
    "sample_rate": 22050,
    "samples_per_frame": 1024,
    "vector_quantizer": {"_target_": MODULES + "GroupFiniteScalarQuantizer", "num_groups": 8,
                         "num_levels_per_group": [8, 7, 6, 6]},
    "audio_decoder": {"_target_": MODULES + "CausalHiFiGANDecoder", "up_sample_rates": [8, 8, 4, 2, 2], "input_dim": 32,
                      "base_channels": 864, "activation": "half_snake", "output_activation": "clamp",
                      "pad_mode": "zeros", "n_groups_equal_to_out_channels": True},
    "audio_encoder": {"_target_": MODULES + "HiFiGANEncoder", "down_sample_rates": [2, 2, 4, 8, 8], "encoded_dim": 32,
                      "base_channels": 24, "activation": "lrelu", "pad_mode": "replicate"},
}
"""The published structural config (in-kernel 7, out-kernel 3, resblock kernels (3, 7, 11) and dilations (1, 3, 5)
are the classes' defaults there)."""

TINY = copy.deepcopy(REAL)
TINY["samples_per_frame"] = 16
TINY["audio_decoder"] |= {"up_sample_rates": [4, 2, 2], "base_channels": 40,  # 40 -> 20 -> 10 -> 5: the last odd, as 27 is
                          "resblock_kernel_sizes": [3, 5], "resblock_dilation_sizes": [1, 2]}
TINY["audio_encoder"] |= {"down_sample_rates": [2, 2, 4], "base_channels": 4, "resblock_kernel_sizes": [3],
                          "resblock_dilation_sizes": [1]}
TINY |= {
    "discriminator": {"_target_": MODULES + "Discriminator", "discriminators": [
        {"_target_": "nemo.collections.tts.modules.encodec_modules.MultiResolutionDiscriminatorSTFT",
         "resolutions": [[64, 16, 64]]}]},
    "generator_loss": {"_target_": "nemo.collections.tts.losses.audio_codec_loss.GeneratorSquaredLoss"},
    "discriminator_loss": {"_target_": "nemo.collections.tts.losses.audio_codec_loss.DiscriminatorSquaredLoss"},
    "loss_resolutions": [[32, 8, 32], [64, 16, 64]],
    "mel_loss_dims": [5, 10],
    "commit_loss_scale": 0.0,
}
OUT_GAIN = 0.09
"""Scale of the output convolution's magnitudes: enough that the clamp is reached on a few percent of samples."""
REAL_OUT_GAIN = 0.01


def rerandomise(model: torch.nn.Module, g: torch.Generator, out_gain: float = OUT_GAIN) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("original0"):  # weight-norm magnitude
                scale = out_gain if "post_conv" in name else 1.0
                p.copy_((0.5 + 1.5 * torch.rand(p.shape, generator=g)) * scale)
            elif name.endswith("original1"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def real_keys() -> dict:
    from hydra.utils import instantiate

    with torch.device("meta"):  # the quantizer's constructor reads its buffers, so it is built on the CPU (it is tiny)
        modules = {name: instantiate(OmegaConf.create(REAL[name])) for name in ("audio_decoder", "audio_encoder")}
    modules["vector_quantizer"] = instantiate(OmegaConf.create(REAL["vector_quantizer"]))
    keys = {name: {k: list(v.shape) for k, v in m.state_dict().items()} for name, m in modules.items()}
    return {"config": REAL, "audio_decoder": keys["audio_decoder"], "vector_quantizer": keys["vector_quantizer"],
            "audio_encoder_key_count": len(keys["audio_encoder"])}


LOSSES = {key: TINY[key] for key in ("generator_loss", "discriminator_loss", "loss_resolutions", "mel_loss_dims", "commit_loss_scale")}


def real_size_check(out: Path) -> None:
    """`--real OUT`: a random AudioCodecModel at the published sizes saved to OUT/real.nemo (about 250 MB, never
    committed) with NeMo's decode of a few frames in OUT/real.safetensors, for a one-off comparison in the project's
    venv (see test_nanocodec_nemo.py's module docstring)."""
    from nemo.collections.tts.models import AudioCodecModel

    g = torch.Generator().manual_seed(SEED + 1)
    model = AudioCodecModel(cfg=OmegaConf.create(REAL | LOSSES))
    rerandomise(model, g, REAL_OUT_GAIN)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_to(str(out / "real.nemo"))
    tokens = torch.randint(0, model.vector_quantizer.codebook_size, (1, 8, 4), generator=g)
    with torch.no_grad():
        audio, _ = model.decode(tokens=tokens, tokens_len=torch.tensor([4]))
    print(f"real size: audio std {audio.std():.3f}, clipped {(audio.abs() >= 1).float().mean():.1%}")
    save_file({"tokens": tokens.contiguous(), "audio": audio.contiguous()}, str(out / "real.safetensors"))


def main() -> None:
    from nemo.collections.tts.models import AudioCodecModel

    if len(sys.argv) == 3 and sys.argv[1] == "--real":
        real_size_check(Path(sys.argv[2]))
        return
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)
    model = AudioCodecModel(cfg=OmegaConf.create(TINY))
    rerandomise(model, g)
    model.eval()
    (HERE / "tiny").mkdir(exist_ok=True)
    model.save_to(str(HERE / "tiny" / "nemo-nano-codec-tiny.nemo"))

    sizes = model.vector_quantizer.codebook_size
    tokens = torch.randint(0, sizes, (2, 8, FRAMES), generator=g)
    tokens_len = torch.tensor([FRAMES, SHORT])
    with torch.no_grad():
        latents = model.dequantize(tokens=tokens, tokens_len=tokens_len)
        audio, audio_len = model.decode(tokens=tokens, tokens_len=tokens_len)
        full = model.dequantize(tokens=tokens, tokens_len=torch.tensor([FRAMES, FRAMES]))
        digits = torch.cat([fsq.codes_to_nonnegative(group) for fsq, group in zip(model.vector_quantizer.fsqs, full.chunk(8, dim=1), strict=True)], dim=1)
    clipped = (audio[0].abs() >= 1).float().mean().item()
    print(f"audio std {audio[0].std():.3f}, clipped {clipped:.1%}, latents {tuple(latents.shape)}, audio {tuple(audio.shape)}")
    save_file({
        "tokens": tokens.contiguous(),
        "tokens_len": tokens_len,
        "digits": digits.round().to(torch.int64).transpose(1, 2).contiguous(),
        "latents": latents.contiguous(),
        "audio": audio.contiguous(),
        "audio_len": audio_len.to(torch.int64),
    }, str(HERE / "nanocodec.safetensors"))
    (HERE / "real_nanocodec_keys.json").write_text(json.dumps(real_keys(), indent=1) + "\n")


if __name__ == "__main__":
    main()
