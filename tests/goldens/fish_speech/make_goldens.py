"""Build the tiny Fish S2 Pro codec and record fish-speech 0.1.0's modified DAC on it.

Run by hand, in a venv of its own that has the reference package (never the project's venv, never CI):

    python3 -m venv /tmp/fish-ref
    /tmp/fish-ref/bin/pip install torch==2.13.0 numpy einops loguru hydra-core omegaconf 'transformers<5' \
        tiktoken soundfile natsort rich click pyrootutils loralib safetensors librosa flatten_dict julius ffmpy \
        importlib_resources tensorboard randomname argbind
    /tmp/fish-ref/bin/pip install --no-deps fish-speech==0.1.0 descript-audio-codec descript-audiotools torchaudio
    # PyPI's torchaudio cannot load its extension beside the CPU torch 2.13; only its Python parts are imported
    # (by audiotools), so the extension is moved out of the way:
    mv /tmp/fish-ref/lib/python3.11/site-packages/torchaudio/lib/_torchaudio.so /tmp/
    /tmp/fish-ref/bin/python tests/goldens/fish_speech/make_goldens.py

It writes, beside itself:
- tiny/codec.pth + tiny/codec_config.json: the reference DAC built with the published geometry's structural flags
  (causal, the same rates and codebook sizes, transformers in the last encoder block and around the quantiser with
  width equal to the latent, so no projections) and the sizes shrunk, every tensor re-randomised with a seed; its
  attention windows shrunk (encoder 512 -> 8, quantiser 128 -> 4) so the windowed paths run on a short clip; the
  state dict saved as the reference's `state_dict()` gives it (weight norm in both spellings, RoPE/mask buffers);
- dac.safetensors: the input clip, the reference's codes, encoder latents and decoded waveform.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny"
SEED = 20261203

DAC_CONFIG = {
    "sample_rate": 44100,
    "encoder_dim": 4,
    "encoder_rates": [2, 4, 8, 8],
    "encoder_transformer_layers": [0, 0, 0, 2],
    "encoder_window": 8,
    "decoder_dim": 64,
    "decoder_rates": [8, 8, 4, 2],
    "head_dim": 64,
    "semantic_codebook_size": 4096,
    "n_codebooks": 9,
    "codebook_size": 1024,
    "codebook_dim": 8,
    "downsample_factor": [2, 2],
    "quantizer_layers": 2,
    "quantizer_heads": 2,
    "quantizer_dim": 64,
    "quantizer_intermediate": 96,
    "quantizer_head_dim": 32,
    "quantizer_window": 4,
}
DAC_GAIN = float(__import__("os").environ.get("DAC_GAIN", "0.75"))
"""Scale of the weight-norm magnitudes and matrices, calibrated for an output std near 0.1 with little clipping."""
CLIP_SAMPLES = 2048 * 14 - 777
"""Not a whole number of frames, so the encoder's right padding is exercised."""


def build_reference_dac(c: dict) -> torch.nn.Module:
    from fish_speech.models.dac.modded_dac import DAC, ModelArgs, WindowLimitedTransformer
    from fish_speech.models.dac.rvq import DownsampleResidualVectorQuantize

    general = functools.partial(ModelArgs, block_size=256, n_local_heads=-1, head_dim=c["head_dim"], rope_base=10000,
                                norm_eps=1e-5, dropout_rate=0.1, attn_dropout_rate=0.1, channels_first=True)
    latent = c["encoder_dim"] * 2 ** len(c["encoder_rates"])

    def transformer():
        return WindowLimitedTransformer(
            causal=True, window_size=c["quantizer_window"], input_dim=latent,
            config=ModelArgs(block_size=256, n_layer=c["quantizer_layers"], n_head=c["quantizer_heads"],
                             dim=c["quantizer_dim"], intermediate_size=c["quantizer_intermediate"], n_local_heads=-1,
                             head_dim=c["quantizer_head_dim"], rope_base=10000, norm_eps=1e-5, channels_first=True))

    quantizer = DownsampleResidualVectorQuantize(
        input_dim=latent, n_codebooks=c["n_codebooks"], codebook_size=c["codebook_size"], codebook_dim=c["codebook_dim"],
        quantizer_dropout=0.5, downsample_factor=c["downsample_factor"], pre_module=transformer(),
        post_module=transformer(), semantic_codebook_size=c["semantic_codebook_size"])
    dac = DAC(encoder_dim=c["encoder_dim"], encoder_rates=c["encoder_rates"], decoder_dim=c["decoder_dim"],
              decoder_rates=c["decoder_rates"], quantizer=quantizer, sample_rate=c["sample_rate"], causal=True,
              encoder_transformer_layers=c["encoder_transformer_layers"], decoder_transformer_layers=[2, 0, 0, 0],
              transformer_general_config=general)
    for module in dac.encoder.modules():  # the reference fixes this window in code; shrink it like the others
        if isinstance(module, WindowLimitedTransformer):
            module.window_size = c["encoder_window"]
    return dac.eval()


def randomise(model: torch.nn.Module, generator: torch.Generator, gain: float) -> None:
    """Every parameter overwritten: matrices Gaussian gain/sqrt(fan_in), weight-norm magnitudes, norms, Snake
    alphas and branch scales near 1 (scales smaller), biases small but nonzero."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("original0", "weight_g"):
                p.copy_(gain * (1.0 + 0.2 * torch.rand(p.shape, generator=generator)))
            elif leaf == "alpha":
                p.copy_(0.5 + torch.rand(p.shape, generator=generator))
            elif leaf == "gamma":
                p.copy_(0.3 + 0.4 * torch.rand(p.shape, generator=generator))
            elif leaf == "bias":
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif "codebook" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=generator) * gain / math.sqrt(fan_in))


def test_clip(samples: int, rate: int) -> torch.Tensor:
    t = torch.arange(samples, dtype=torch.float64) / rate
    g = torch.Generator().manual_seed(7)
    clip = 0.3 * torch.sin(2 * math.pi * 220 * t) + 0.2 * torch.sin(2 * math.pi * 1375 * t + 0.5) * torch.sin(2 * math.pi * 3 * t)
    return (clip + 0.02 * torch.randn(samples, generator=g, dtype=torch.float64)).float()


def make_dac() -> None:
    torch.manual_seed(SEED)
    dac = build_reference_dac(DAC_CONFIG)
    randomise(dac, torch.Generator().manual_seed(SEED), gain=DAC_GAIN)
    TINY.mkdir(exist_ok=True)
    state = dac.state_dict()
    torch.save(state, TINY / "codec.pth")
    (TINY / "codec_config.json").write_text(json.dumps(DAC_CONFIG, indent=1) + "\n")

    clip = test_clip(CLIP_SAMPLES, DAC_CONFIG["sample_rate"])
    with torch.inference_mode():
        codes, _ = dac.encode(clip[None, None], None)
        padded = torch.nn.functional.pad(clip, (0, -clip.shape[-1] % dac.frame_length))
        latents = dac.encoder(padded[None, None])
        audio, _ = dac.decode(codes, torch.tensor([codes.shape[-1]]))
    audio = audio[0, 0]
    print(f"dac: {sum(p.numel() for p in dac.parameters())} params, {len(state)} keys, codes {tuple(codes.shape)}, "
          f"audio {tuple(audio.shape)} std {audio.std():.3f} clipped {(audio.abs() > 0.999).float().mean():.3f}, "
          f"distinct codes per book {[len(set(codes[0, k].tolist())) for k in range(codes.shape[1])]}")
    save_file({"clip": clip.contiguous(), "codes": codes[0].contiguous(), "latents": latents[0].contiguous(),
               "audio": audio.contiguous()}, str(HERE / "dac.safetensors"))


if __name__ == "__main__":
    make_dac()
