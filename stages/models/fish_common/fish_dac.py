"""Fish Audio's modified DAC: 44.1 kHz audio <-> frames of 10 codes (one 4096-entry semantic code and 9 residual
1024-entry codes), one frame per 2048 samples.

Every convolution is causal and the transformers (in the last encoder block and around the quantiser) attend only
to a window of the past, so a frame's samples depend on earlier frames only: `FishDAC.stream` decodes a request's
next frames from its `StreamState` (each convolution's last inputs, each transposed convolution's overlap tail, the
post-transformer's keys and values over its window), equal to decoding all its frames at once, at the cost of the
new frames alone. Module names equal the tensor names of `codec.pth`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from vocalis.stages.components.causal_stream import CausalStream, StreamState
from vocalis.stages.layers.attention import causal_mask
from vocalis.stages.layers.audio_blocks import (
    BlockSequence,
    CausalConvNeXtBlock,
    CausalConvTranspose1d,
    FactorizedVQ,
    Nested,
    ResidualUnit,
    Snake,
    factorized_rvq_decode,
    factorized_rvq_encode,
    nested_causal_conv,
)
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import interleaved_rope
from vocalis.stages.layers.weights import fold_weight_norm, load_strict, read_state_dict
from vocalis.stages.models.fish_common.fish_dac_config import FishDACConfig
from vocalis.stages.models.fish_common.gptfast import gptfast_block

CODEC_FILE = "codec.pth"
DERIVED_KEYS = (r".*\.freqs_cis", r".*\.causal_mask")
"""Buffers the reference saves with its transformers (its RoPE table and mask), recomputed here from the config."""
ENCODER_HEAD_WIDTH = 64
"""The reference gives an encoder transformer width / 64 heads, whatever its head_dim."""


def residual_units(dim: int) -> list[nn.Module]:
    """x + conv(snake(conv_dilated(snake(x)))) per dilation, in a `block` Sequential (the checkpoint's names)."""
    return [ResidualUnit(Snake(dim), nested_causal_conv(dim, dim, 7, dilation=d), Snake(dim), nested_causal_conv(dim, dim, 1))
            for d in (1, 3, 9)]


class WindowedTransformer(nn.Module):
    """A causal transformer over [B, C, T] whose queries see at most `window` positions back (themselves included)."""

    def __init__(self, dim: int, layers: int, heads: int, head_dim: int, intermediate: int, window: int,
                 config: FishDACConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            gptfast_block(dim, heads, heads, head_dim, intermediate, config.norm_eps, layer_scale=True) for _ in range(layers)
        )
        self.norm = RMSNorm(dim, config.norm_eps)
        self.head_dim, self.window, self.rope_base = head_dim, window, config.rope_base

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)
        length = x.shape[1]
        rope = interleaved_rope(torch.arange(length, device=x.device), self.head_dim, self.rope_base, torch.bfloat16)
        mask = causal_mask(length, self.window, x.device)
        for layer in self.layers:
            x = layer.dense(x, rope, mask)
        return self.norm(x).transpose(1, 2)

    def stream(self, x: torch.Tensor, carry: CausalStream, positions: Sequence[int]) -> torch.Tensor:
        """x [B, C, L] of each row's next frames (right-padded), positions[i] the frames row i decoded before: each
        layer attends over the keys and values its row carries and the new ones, at a whole decode's RoPE positions."""
        x = x.transpose(1, 2)
        at, mask = carry.window_mask(positions, x.shape[1], self.window, x.device)
        rope = interleaved_rope(at, self.head_dim, self.rope_base, torch.bfloat16)
        for layer in self.layers:
            attention = layer.attention
            held = self.window - 1
            kv = carry.carried_kv(attention, x.new_zeros(1, attention.kv_heads, held, attention.head_dim))
            x = layer.dense(x, rope, mask, kv=kv)
            carry.keep_kv(attention, kv, held)
        return self.norm(x).transpose(1, 2)


class EncoderBlock(BlockSequence):
    def __init__(self, dim: int, stride: int, transformer_layers: int, config: FishDACConfig) -> None:
        half = dim // 2
        layers = [*residual_units(half), Snake(half), nested_causal_conv(half, dim, 2 * stride, stride=stride)]
        if transformer_layers:
            layers.append(WindowedTransformer(dim, transformer_layers, dim // ENCODER_HEAD_WIDTH, config.head_dim, dim * 3,
                                              config.encoder_window, config))
        super().__init__(*layers)


class Encoder(BlockSequence):
    """[B, 1, samples] to latents [B, latent_dim, samples / hop_length]."""

    def __init__(self, config: FishDACConfig) -> None:
        dim = config.encoder_dim
        layers: list[nn.Module] = [nested_causal_conv(1, dim, 7)]
        for stride, transformer_layers in zip(config.encoder_rates, config.encoder_transformer_layers, strict=True):
            dim *= 2
            layers.append(EncoderBlock(dim, stride, transformer_layers, config))
        layers += [Snake(dim), nested_causal_conv(dim, config.latent_dim, 3)]
        super().__init__(*layers)


class DecoderBlock(BlockSequence):
    def __init__(self, input_dim: int, output_dim: int, stride: int) -> None:
        super().__init__(Snake(input_dim), Nested(CausalConvTranspose1d(input_dim, output_dim, 2 * stride, stride)),
                         *residual_units(output_dim))

    def stream(self, x: torch.Tensor, carry: CausalStream) -> torch.Tensor:
        return carry.run(self.block, x)


class Decoder(nn.Module):
    """Latents [B, latent_dim, T] to samples [B, 1, T * hop_length] in [-1, 1]."""

    def __init__(self, config: FishDACConfig) -> None:
        super().__init__()
        channels = config.decoder_dim
        layers: list[nn.Module] = [nested_causal_conv(config.latent_dim, channels, 7)]
        for i, stride in enumerate(config.decoder_rates):
            layers.append(DecoderBlock(channels // 2**i, channels // 2 ** (i + 1), stride))
        out = channels // 2 ** len(config.decoder_rates)
        layers += [Snake(out), nested_causal_conv(out, 1, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class ResidualQuantizer(nn.Module):
    """`quantizers.N`: a residual stack of factorized VQs."""

    def __init__(self, input_dim: int, count: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(FactorizedVQ(input_dim, codebook_size, codebook_dim) for _ in range(count))


class Quantizer(nn.Module):
    """Latents <-> codes: downsampled in time, through a windowed transformer, quantised to a semantic code plus
    residual codes; decoding runs the mirror path."""

    def __init__(self, config: FishDACConfig) -> None:
        super().__init__()
        c, dim = config, config.latent_dim
        if c.quantizer_dim != dim:
            raise ValueError(f"quantizer_dim {c.quantizer_dim} must equal the latent width {dim} (no projection is built)")
        self.config = c
        self.semantic_quantizer = ResidualQuantizer(dim, 1, c.semantic_codebook_size, c.codebook_dim)
        self.quantizer = ResidualQuantizer(dim, c.n_codebooks, c.codebook_size, c.codebook_dim)
        self.downsample = nn.Sequential(*(nn.Sequential(nested_causal_conv(dim, dim, f, stride=f), CausalConvNeXtBlock(dim))
                                          for f in c.downsample_factor))
        self.upsample = nn.Sequential(*(nn.Sequential(Nested(CausalConvTranspose1d(dim, dim, f, f)), CausalConvNeXtBlock(dim))
                                        for f in reversed(c.downsample_factor)))

        def transformer() -> WindowedTransformer:
            return WindowedTransformer(dim, c.quantizer_layers, c.quantizer_heads, c.quantizer_head_dim,
                                       c.quantizer_intermediate, c.quantizer_window, c)

        self.pre_module = transformer()
        self.post_module = transformer()

    def encode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents [B, D, T * prod(downsample_factor)] to codes [B, 1 + n_codebooks, T]."""
        z = self.pre_module(self.downsample(latents))
        semantic, z_semantic = factorized_rvq_encode(z, self.semantic_quantizer.quantizers)
        residual, _ = factorized_rvq_encode(z - z_semantic, self.quantizer.quantizers)
        return torch.cat([semantic, residual], dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes [B, 1 + n_codebooks, T] (clamped into each codebook) to latents [B, D, T * prod(downsample_factor)]."""
        return self.upsample(self.post_module(self.lookup(codes)))

    def stream(self, codes: torch.Tensor, carry: CausalStream, positions: Sequence[int]) -> torch.Tensor:
        """`decode` of each row's next frames, from its carry; positions[i]: the frames row i decoded before."""
        return carry.run(self.upsample, self.post_module.stream(self.lookup(codes), carry, positions))

    def lookup(self, codes: torch.Tensor) -> torch.Tensor:
        semantic = codes[:, :1].clamp(0, self.config.semantic_codebook_size - 1)
        residual = codes[:, 1:].clamp(0, self.config.codebook_size - 1)
        z = factorized_rvq_decode(semantic, self.semantic_quantizer.quantizers)
        return z + factorized_rvq_decode(residual, self.quantizer.quantizers)


class FishDAC(nn.Module):
    """`encoder`, `quantizer`, `decoder` of `codec.pth`."""

    def __init__(self, config: FishDACConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.quantizer = Quantizer(config)
        self.decoder = Decoder(config)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    @property
    def samples_per_frame(self) -> int:
        return self.config.samples_per_frame

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Audio [B, samples] at `sample_rate` to codes [B, num_codebooks, ceil(samples / samples_per_frame)];
        the audio is zero-padded on the right to whole frames first."""
        frame = self.samples_per_frame
        pad = -audio.shape[-1] % frame
        x = torch.nn.functional.pad(audio.to(next(self.parameters()).dtype), (0, pad))[:, None]
        return self.quantizer.encode(self.encoder(x))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes [B, num_codebooks, T] to audio [B, T * samples_per_frame]."""
        return self.decoder(self.quantizer.decode(codes))[:, 0]

    def stream(self, codes: torch.Tensor, states: Sequence[StreamState], frames: Sequence[int]) -> torch.Tensor:
        """Codes [B, num_codebooks, L] of each row's next frames[i] frames (right-padded to L) to their audio [B, L *
        samples_per_frame] (row i's first frames[i] * samples_per_frame valid), equal to those samples of decoding all
        the row's frames at once; states[i] advances past them."""
        carry = CausalStream([state.carry for state in states], frames)
        latents = self.quantizer.stream(codes, carry, [state.frames for state in states])
        for state, count in zip(states, frames, strict=True):
            state.frames += count
        return carry.run(self.decoder.model, latents)[:, 0]


def read_codec_state(path: Path) -> dict[str, torch.Tensor]:
    """codec.pth's tensors (weights_only unpickling; a training checkpoint's `generator` part, nested or as a key
    prefix), with weight norm folded in either spelling."""
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, dict) and isinstance(state.get("generator"), dict):
        state = state["generator"]
    elif isinstance(state, dict) and state and all(k.startswith("generator.") for k in state):
        state = {k[len("generator."):]: v for k, v in state.items()}
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        # Anything else (a bare model, a different wrapper) is refused with the reader's own message.
        state = read_state_dict(path)
    return fold_weight_norm(state)


def load_fish_dac(directory: Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> FishDAC:
    """The codec of a checkpoint directory (`codec.pth`, optional `codec_config.json`), loaded strictly."""
    directory = Path(directory)
    path = directory / CODEC_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: no {CODEC_FILE} (Fish Audio's DAC codec)")
    model = FishDAC(FishDACConfig.for_checkpoint(directory))
    load_strict(model, read_codec_state(path), path, unused=DERIVED_KEYS)
    return model.to(device=device, dtype=dtype).eval()
