"""AudioVAE v2: a causal convolutional encoder (16 kHz audio -> latents) and decoder (latents -> 48 kHz).

Every convolution is causal (padded on the left, transposed ones trimmed on the right), so a
latent frame's audio depends only on frames before it, within `receptive_field_frames`: the decoder can
run on chunks with that much left context and reproduce a whole-utterance decode exactly.
The decoder is conditioned on its output rate (a per-channel scale and bias per rate bucket).

Names follow audiovae.safetensors: `encoder.block.*`, `encoder.fc_mu`, `decoder.model.*`,
`decoder.sr_cond_model.*`, `decoder.sr_bin_boundaries`. The file stores convolutions with old-style
weight norm (`weight_g`/`weight_v`); the loader folds them into plain weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.audio_blocks import (
    RESIDUAL_DILATIONS,
    BlockSequence,
    CausalConv1d,
    CausalConvTranspose1d,
    ResidualUnit,
    Snake,
)
from vocalis.stages.models.voxcpm2.config import AudioVAEConfig

RESIDUAL_KERNEL = 7


def residual_units(dim: int, groups: int) -> list[ResidualUnit]:
    """The three dilated units of a block, each a `block` Sequential (Snake, conv, Snake, 1x1 conv)."""
    return [
        ResidualUnit(Snake(dim), CausalConv1d(dim, dim, RESIDUAL_KERNEL, dilation=d, groups=groups), Snake(dim), CausalConv1d(dim, dim, 1))
        for d in RESIDUAL_DILATIONS
    ]


class EncoderBlock(BlockSequence):
    def __init__(self, dim: int, stride: int, depthwise: bool) -> None:
        half = dim // 2
        groups = half if depthwise else 1
        super().__init__(
            *residual_units(half, groups),
            Snake(half),
            CausalConv1d(half, dim, 2 * stride, stride=stride),
        )


class Encoder(nn.Module):
    def __init__(self, config: AudioVAEConfig) -> None:
        super().__init__()
        dim = config.encoder_dim
        layers: list[nn.Module] = [CausalConv1d(1, dim, 7)]
        for stride in config.encoder_rates:
            dim *= 2
            layers.append(EncoderBlock(dim, stride, config.depthwise))
        self.block = nn.Sequential(*layers)
        self.fc_mu = CausalConv1d(dim, config.latent_dim, 3)
        self.fc_logvar = CausalConv1d(dim, config.latent_dim, 3)
        """Present in the checkpoint; inference uses the mean only."""

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """[B, 1, samples] -> latent means [B, D, samples / hop]."""
        return self.fc_mu(self.block(audio))


class DecoderBlock(BlockSequence):
    def __init__(self, in_dim: int, out_dim: int, stride: int, depthwise: bool) -> None:
        groups = out_dim if depthwise else 1
        super().__init__(
            Snake(in_dim),
            CausalConvTranspose1d(in_dim, out_dim, 2 * stride, stride),
            *residual_units(out_dim, groups),
        )
        self.input_channels = in_dim


class RateCondition(nn.Module):
    """Per output-rate bucket: scale and bias per channel (or an added / concatenated embedding)."""

    def __init__(self, dim: int, config: AudioVAEConfig) -> None:
        super().__init__()
        buckets = len(config.sr_bin_boundaries or ()) + 1
        self.kind = config.cond_type
        out_in = dim
        if self.kind in ("scale_bias", "scale_bias_init"):
            self.scale_embed = nn.Embedding(buckets, dim)
            self.bias_embed = nn.Embedding(buckets, dim)
        elif self.kind == "add":
            self.cond_embed = nn.Embedding(buckets, dim)
        else:  # concat
            self.cond_embed = nn.Embedding(buckets, config.cond_dim)
            out_in = dim + config.cond_dim
        self.out_layer = nn.Sequential(Snake(out_in), CausalConv1d(out_in, dim, 1)) if config.cond_out_layer else nn.Identity()

    def forward(self, x: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        if self.kind in ("scale_bias", "scale_bias_init"):
            x = x * self.scale_embed(bucket).unsqueeze(-1) + self.bias_embed(bucket).unsqueeze(-1)
        elif self.kind == "add":
            x = x + self.cond_embed(bucket).unsqueeze(-1)
        else:
            x = torch.cat([x, self.cond_embed(bucket).unsqueeze(-1).expand(-1, -1, x.shape[-1])], dim=1)
        return self.out_layer(x)


class Decoder(nn.Module):
    def __init__(self, config: AudioVAEConfig) -> None:
        super().__init__()
        latent, channels = config.latent_dim, config.decoder_dim
        if config.depthwise:
            layers: list[nn.Module] = [CausalConv1d(latent, latent, 7, groups=latent), CausalConv1d(latent, channels, 1)]
        else:
            layers = [CausalConv1d(latent, channels, 7)]
        for i, stride in enumerate(config.decoder_rates):
            layers.append(DecoderBlock(channels // 2**i, channels // 2 ** (i + 1), stride, config.depthwise))
        out_dim = channels // 2 ** len(config.decoder_rates)
        layers += [Snake(out_dim), CausalConv1d(out_dim, 1, 7), nn.Tanh()]
        self.model = nn.ModuleList(layers)
        self.sr_cond_model: nn.ModuleList | None = None
        self.bucket: int | None = None
        if config.sr_bin_boundaries is not None:
            self.register_buffer("sr_bin_boundaries", torch.tensor(config.sr_bin_boundaries, dtype=torch.int32))
            self.sr_cond_model = nn.ModuleList(
                RateCondition(layer.input_channels, config) if isinstance(layer, DecoderBlock) else None for layer in layers
            )
            self.out_rate = config.out_sample_rate

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Latents [B, D, T] -> audio [B, 1, T * hop] at the output rate."""
        if self.sr_cond_model is None:
            for layer in self.model:
                z = layer(z)
            return z
        rate = torch.tensor([self.out_rate], dtype=torch.int32, device=z.device)
        bucket = torch.bucketize(rate, self.sr_bin_boundaries).expand(z.shape[0])
        for layer, condition in zip(self.model, self.sr_cond_model, strict=True):
            if condition is not None:
                z = condition(z, bucket)
            z = layer(z)
        return z


class AudioVAE(nn.Module):
    def __init__(self, config: AudioVAEConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Audio [B, samples] at config.sample_rate, right-padded to whole frames -> latents [B, D, frames]."""
        hop = self.config.encoder_hop
        pad = -audio.shape[-1] % hop
        return self.encoder(F.pad(audio, (0, pad))[:, None])

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latents [B, D, T] -> audio [B, T * decoder_hop]."""
        return self.decoder(z)[:, 0]


def receptive_field_frames(config: AudioVAEConfig) -> int:
    """Latent frames before a frame that can affect its audio: the decoder's left context for an exact chunk."""
    kernel_context = RESIDUAL_KERNEL - 1
    units = sum(kernel_context * d for d in RESIDUAL_DILATIONS)  # samples of context of one block's residual stack
    frames = 6.0  # first conv (kernel 7) at the latent rate
    rate = 1
    for stride in config.decoder_rates:
        frames += 1 / rate  # a transposed conv of kernel 2*stride reads one earlier input frame
        rate *= stride
        frames += units / rate
    frames += 6 / rate  # last conv (kernel 7) at the output rate
    return math.ceil(frames) + 1  # +1: a frame's first sample already reaches back into the frame before
