"""The Higgs Audio v2 tokenizer: audio codes to 24 kHz waveform (decode), and a reference clip to codes (encode).

Decode: residual codebooks -> summed projections -> `fc2` -> DAC decoder (Snake activations,
transposed convolutions). Encode: a DAC encoder on the waveform and a HuBERT model on its
16 kHz resampling (mean of all its hidden states, then a small conv stack), concatenated,
projected by `fc`, and quantized residually. Module names follow `audio_tokenizer/model.safetensors`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.higgs_audio_v2_tokenizer.config import AudioTokenizerConfig, DacConfig
from vocalis.stages.components.higgs_audio_v2_tokenizer.resample import resample
from vocalis.stages.components.wav2vec2 import Wav2Vec2Model as HubertModel
from vocalis.stages.layers.audio_blocks import ResidualUnit, Snake, nearest_code, residual_encode, snake_residual_units

DAC_UNIT = ("snake1", "conv1", "snake2", "conv2")
"""Attribute names of a DAC residual unit's layers in the checkpoint."""


def dac_conv(in_channels: int, out_channels: int, kernel_size: int, dilation: int) -> nn.Conv1d:
    """DAC's centred (non-causal) convolution, padded to keep the length."""
    return nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, padding=(kernel_size - 1) // 2 * dilation)


class DacEncoderBlock(nn.Module):
    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        self.res_unit1, self.res_unit2, self.res_unit3 = snake_residual_units(channels // 2, dac_conv, names=DAC_UNIT)
        self.snake1 = Snake(channels // 2)
        self.conv1 = nn.Conv1d(channels // 2, channels, kernel_size=2 * stride, stride=stride, padding=math.ceil(stride / 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1(self.snake1(self.res_unit3(self.res_unit2(self.res_unit1(x)))))


class DacEncoder(nn.Module):
    def __init__(self, config: DacConfig) -> None:
        super().__init__()
        width = config.encoder_hidden_size
        self.conv1 = nn.Conv1d(1, width, kernel_size=7, padding=3)
        self.block = nn.ModuleList(
            DacEncoderBlock(width * 2 ** (i + 1), stride) for i, stride in enumerate(config.downsampling_ratios)
        )
        top = width * 2 ** len(config.downsampling_ratios)
        self.snake1 = Snake(top)
        self.conv2 = nn.Conv1d(top, config.hidden_size, kernel_size=3, padding=1)
        self.strides = tuple(config.downsampling_ratios)

    def output_length(self, length: int) -> int:
        """Frames out for `length` samples in (only the strided convolutions change the length)."""
        for stride in self.strides:
            length = (length + 2 * math.ceil(stride / 2) - 2 * stride) // stride + 1
        return length

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))


class DacDecoderBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.snake1 = Snake(in_channels)
        # Higgs' DAC pads odd strides' outputs so that every block upsamples exactly by its stride.
        self.conv_t1 = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size=2 * stride, stride=stride, padding=math.ceil(stride / 2),
            output_padding=stride % 2,
        )
        self.res_unit1, self.res_unit2, self.res_unit3 = snake_residual_units(out_channels, dac_conv, names=DAC_UNIT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res_unit3(self.res_unit2(self.res_unit1(self.conv_t1(self.snake1(x)))))


class DacDecoder(nn.Module):
    """DAC's decoder without the final tanh (as Higgs uses it)."""

    def __init__(self, config: DacConfig) -> None:
        super().__init__()
        width = config.decoder_hidden_size
        self.conv1 = nn.Conv1d(config.hidden_size, width, kernel_size=7, padding=3)
        self.block = nn.ModuleList(
            DacDecoderBlock(width // 2**i, width // 2 ** (i + 1), stride) for i, stride in enumerate(config.upsampling_ratios)
        )
        last = width // 2 ** len(config.upsampling_ratios)
        self.snake1 = Snake(last)
        self.conv2 = nn.Conv1d(last, 1, kernel_size=7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))


# -- the semantic branch and the quantizer -------------------------------------------------


def semantic_residual_unit(config: AudioTokenizerConfig, channels: int, dilation: int) -> ResidualUnit:
    """x + conv2(elu(conv1(elu(x)))), conv1 dilated and centred."""
    kernel = config.unit_kernel_size
    conv1 = nn.Conv1d(channels, channels, kernel, padding=((kernel - 1) // 2) * dilation, dilation=dilation, bias=False)
    conv2 = nn.Conv1d(channels, channels, kernel_size=1, bias=False)
    return ResidualUnit(nn.ELU(), conv1, nn.ELU(), conv2, names=("elu1", "conv1", "elu2", "conv2"))


class SemanticEncoderBlock(nn.Module):
    def __init__(self, config: AudioTokenizerConfig, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(semantic_residual_unit(config, in_channels, d) for d in config.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        width = config.semantic.hidden_size
        self.conv = nn.Conv1d(width, width, config.kernel_size, padding=config.kernel_size // 2, bias=False)
        blocks = []
        channels = width
        for ratio, stride in zip(config.channel_ratios, config.strides, strict=True):
            out_channels = int(width * ratio)
            blocks.append(SemanticEncoderBlock(config, channels, out_channels, stride))
            channels = out_channels
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class Codebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.embed = nn.Parameter(torch.zeros(size, dim))

    def nearest(self, x: torch.Tensor) -> torch.Tensor:
        """Index of the nearest entry (Euclidean) for each row of x [N, D]."""
        return nearest_code(x, self.embed, exact_distance=False)


class VectorQuantizer(nn.Module):
    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.codebook = Codebook(config.codebook_size, config.codebook_dim)
        self.project_in = nn.Linear(config.hidden_size, config.codebook_dim)
        self.project_out = nn.Linear(config.codebook_dim, config.hidden_size)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Codes [B, T] of latents [B, D, T]."""
        projected = self.project_in(x.transpose(1, 2))
        batch, frames, dim = projected.shape
        return self.codebook.nearest(projected.reshape(-1, dim)).view(batch, frames)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Latents [B, D, T] of codes [B, T]."""
        return self.project_out(F.embedding(codes, self.codebook.embed)).transpose(1, 2)


class ResidualQuantizer(nn.Module):
    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(VectorQuantizer(config) for _ in range(config.num_quantizers))

    def encode(self, latents: torch.Tensor) -> torch.Tensor:
        return torch.stack(residual_encode(latents, self.quantizers), dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        out = 0
        for k, quantizer in enumerate(self.quantizers[: codes.shape[1]]):
            out = out + quantizer.decode(codes[:, k])
        return out


class AudioTokenizer(nn.Module):
    def __init__(self, config: AudioTokenizerConfig) -> None:
        super().__init__()
        self.config = config
        self.acoustic_encoder = DacEncoder(config.acoustic)
        self.acoustic_decoder = DacDecoder(config.acoustic)
        self.encoder_semantic = SemanticEncoder(config)
        self.semantic_model = HubertModel(config.semantic)
        self.fc = nn.Linear(config.hidden_size, config.hidden_size)
        self.fc2 = nn.Linear(config.hidden_size, config.acoustic.hidden_size)
        self.quantizer = ResidualQuantizer(config)

    @property
    def samples_per_frame(self) -> int:
        return self.config.hop_length

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Waveforms [B, T * hop] of codes [B, C, T]."""
        latents = self.quantizer.decode(codes)
        acoustic = self.fc2(latents.transpose(1, 2)).transpose(1, 2)
        return self.acoustic_decoder(acoustic)[:, 0]

    def semantic_features(self, waveform: torch.Tensor) -> torch.Tensor:
        """HuBERT's mean hidden state [B, T', H] of waveforms [B, N] at the tokenizer's rate."""
        config = self.config
        samples = waveform
        if config.sample_rate != config.semantic_sample_rate:
            samples = resample(samples, config.sample_rate, config.semantic_sample_rate)
        samples = F.pad(samples, (160, 160))
        features = torch.stack(self.semantic_model(samples), dim=1).mean(dim=1)
        if config.semantic_downsample_factor > 1:
            features = features[:, :: config.semantic_downsample_factor, :]
        return features

    def encode(self, waveform: torch.Tensor) -> torch.Tensor:
        """Codes [B, C, T] of waveforms [B, N] at the tokenizer's rate."""
        return self.quantizer.encode(self.latents(waveform))

    def latents(self, waveform: torch.Tensor) -> torch.Tensor:
        """The joint acoustic + semantic latent [B, D, T] that the quantizer codes."""
        semantic = self.encoder_semantic(self.semantic_features(waveform).transpose(1, 2))
        x = waveform[:, None]
        if self.acoustic_encoder.output_length(x.shape[-1]) != semantic.shape[-1]:
            pad = self.config.hop_length // 2
            x = F.pad(x, (pad, pad))
        acoustic = self.acoustic_encoder(x)
        return self.fc(torch.cat([acoustic, semantic], dim=1).transpose(1, 2)).transpose(1, 2)
