"""AuK's audio VAE (BigVGAN decoder, convolutional encoder), 24 kHz <-> 64-dim latents at 50 frames/s.

The encoder turns a source clip into normalised latents (its posterior mean, or a draw from the posterior); the
decoder turns latents back into audio. The decoder is causal but for its first convolution (3 frames of lookahead)
and the anti-aliasing upsamplers (a few samples), and has a finite receptive field, so `decode_chunk` with enough
left context and lookahead gives the samples a whole decode would. The normalising flow of the checkpoint only
regularises the posterior in training: it is never built (its tensors are declared unused by the loader).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.alias_free import Activation1d
from vocalis.stages.layers.audio_blocks import CausalConv1d, CausalConvTranspose1d, SnakeBeta
from vocalis.stages.models.auk.config import VAEConfig


class PaddedConv(nn.Module):
    """A centred-padded Conv1d under `layer` (the encoder's weight-normed convolutions)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1) -> None:
        super().__init__()
        self.layer = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, padding=(kernel_size - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class ResStack(nn.Module):
    def __init__(self, channels: int, kernel_size: int, base: int, count: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(
                nn.LeakyReLU(), nn.Conv1d(channels, channels, kernel_size, dilation=base**i, padding=base**i),
                nn.LeakyReLU(), nn.Conv1d(channels, channels, kernel_size, padding=1),
            )
            for i in range(count)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(x)
        return x


class Encoder(nn.Module):
    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        channels, factors = config.downsample_channels, config.downsample_rates
        out = config.latent_dim * (2 if config.use_vae else 1)
        layers: list[nn.Module] = [PaddedConv(1, channels[0], 3), nn.LeakyReLU(0.2)]
        for in_c, out_c, factor in zip(channels[:-1], channels[1:], factors, strict=True):
            layers += [PaddedConv(in_c, out_c, factor * 2, stride=factor), ResStack(out_c, 3, 2, 6), nn.LeakyReLU(0.2)]
        layers.append(PaddedConv(channels[-1], out, 3))
        self.generator = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.generator(x)


class AMPBlock(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...], act_causal: bool) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(CausalConv1d(channels, channels, kernel_size, dilation=d) for d in dilations)
        self.convs2 = nn.ModuleList(CausalConv1d(channels, channels, kernel_size) for _ in dilations)
        self.activations = nn.ModuleList(Activation1d(SnakeBeta(channels), causal=act_causal) for _ in range(2 * len(dilations)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.activations[::2], self.activations[1::2], strict=True):
            x = x + c2(a2(c1(a1(x))))
        return x


class AuKVAE(nn.Module):
    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        if not config.causal:
            raise ValueError("only the causal AuK VAE is supported (vae.model_init_kwargs.causal must be true)")
        self.config = config
        self.hop = config.hop
        self.register_buffer("global_mean", torch.zeros(config.latent_dim))
        self.register_buffer("global_log_std", torch.ones(config.latent_dim))
        self.audio_encoder = Encoder(config)
        first = config.upsample_initial_channel
        self.conv_pre = nn.Conv1d(config.latent_dim, first, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ModuleList([CausalConvTranspose1d(first // 2**i, first // 2 ** (i + 1), k, u)])
            for i, (u, k) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes, strict=True))
        )
        self.resblocks = nn.ModuleList(
            AMPBlock(first // 2 ** (i + 1), k, tuple(d), config.act_causal)
            for i in range(len(config.upsample_rates))
            for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes, strict=True)
        )
        last = first // 2 ** len(config.upsample_rates)
        self.activation_post = Activation1d(SnakeBeta(last), causal=config.act_causal)
        self.conv_post = CausalConv1d(last, 1, 7, bias=False)
        self.lookahead_frames = 6
        """Latent frames past a chunk that its samples depend on: conv_pre's 3, plus the anti-aliasing upsamplers'
        replicate-padded taps at every level (measured by gradient on the published kernel sizes: 6)."""

    def encode(self, samples: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Normalised latents [frames, latent] of mono samples [n] (n a multiple of the hop): the posterior mean, or a
        draw from the posterior with `generator`."""
        stats = self.audio_encoder(samples.float()[None, None])
        mean, log_std = stats.chunk(2, 1)
        latent = mean
        if generator is not None:
            noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
            latent = mean + noise * log_std.exp()
        latent = latent[0].transpose(0, 1)[: samples.shape[-1] // self.hop]
        return (latent - self.global_mean) / self.global_log_std.sqrt()

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Samples [B, frames x hop] of normalised latents [B, frames, latent]."""
        x = (latents.float() * self.global_log_std.sqrt() + self.global_mean).transpose(1, 2)
        x = self.conv_pre(x)
        kernels = len(self.config.resblock_kernel_sizes)
        for i, up in enumerate(self.ups):
            x = up[0](x)
            x = sum(self.resblocks[i * kernels + j](x) for j in range(kernels)) / kernels
        x = self.conv_post(self.activation_post(x))
        return torch.clamp(x, -1.0, 1.0)[:, 0]

    def decode_chunk(self, latents: torch.Tensor, start: int, end: int, context: int) -> torch.Tensor:
        """Samples of frames [start, end) of latents [B, frames, latent], decoding `context` frames before them and
        `lookahead_frames` after (fewer at the edges, where a whole decode has no more either)."""
        first = max(0, start - context)
        last = min(latents.shape[1], end + self.lookahead_frames)
        audio = self.decode(latents[:, first:last])
        return audio[:, (start - first) * self.hop: (end - first) * self.hop]


def padded_samples(samples: torch.Tensor, hop: int) -> torch.Tensor:
    """Samples cut to a whole number of hops (the encoder's frames), at least one hop."""
    whole = samples.shape[-1] // hop * hop
    return samples[..., :whole] if whole else F.pad(samples, (0, hop - samples.shape[-1]))
