"""The x-vector of a voice to clone: the ECAPA-TDNN `speaker_encoder.*` over a 128-bin log-mel spectrogram of the clip
(`matcha_log_mel` with `SPEAKER_MEL`)."""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.models.qwen3_tts.config import SpeakerEncoderConfig

SPEAKER_MEL = {"sample_rate": 24000, "n_fft": 1024, "num_mels": 128, "hop_size": 256, "win_size": 1024, "fmin": 0.0, "fmax": 12000.0}
"""The reference's fixed analysis settings of the encoder's input (`speech_features.matcha_log_mel`, 24 kHz)."""


def _conv(in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, padding="same", padding_mode="reflect")


class TDNN(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.conv = _conv(in_channels, out_channels, kernel_size, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Res2Net(nn.Module):
    """Channels split in `scale` groups; group i is convolved after adding group i-1's output."""

    def __init__(self, channels: int, scale: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNN(channels // scale, channels // scale, kernel_size, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, previous = [], None
        for i, part in enumerate(torch.chunk(x, self.scale, dim=1)):
            if i == 0:
                out = part
            else:
                out = self.blocks[i - 1](part if i == 1 else part + previous)
            outputs.append(out)
            previous = out
        return torch.cat(outputs, dim=1)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, se_channels: int) -> None:
        super().__init__()
        self.conv1 = _conv(channels, se_channels, 1)
        self.conv2 = _conv(se_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.sigmoid(self.conv2(torch.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * weights


class SERes2NetBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, scale: int, se_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.tdnn1 = TDNN(in_channels, out_channels, 1, 1)
        self.res2net_block = Res2Net(out_channels, scale, kernel_size, dilation)
        self.tdnn2 = TDNN(out_channels, out_channels, 1, 1)
        self.se_block = SqueezeExcitation(out_channels, se_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


class AttentiveStatsPooling(nn.Module):
    """Mean and standard deviation over time, weighted by attention that also sees the global statistics."""

    def __init__(self, channels: int, attention_channels: int) -> None:
        super().__init__()
        self.tdnn = TDNN(channels * 3, attention_channels, 1, 1)
        self.conv = _conv(attention_channels, channels, 1)

    @staticmethod
    def _stats(x: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = (weights * x).sum(2)
        std = torch.sqrt((weights * (x - mean[..., None]).pow(2)).sum(2).clamp(1e-12))
        return mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        mean, std = self._stats(x, torch.full_like(x[:, :1], 1.0 / length))
        context = torch.cat([x, mean[..., None].expand(-1, -1, length), std[..., None].expand(-1, -1, length)], dim=1)
        attention = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        mean, std = self._stats(x, attention)
        return torch.cat([mean, std], dim=1)[..., None]


class SpeakerEncoder(nn.Module):
    """`speaker_encoder.*`: log-mel [B, frames, 128] to x-vectors [B, enc_dim]."""

    def __init__(self, config: SpeakerEncoderConfig) -> None:
        super().__init__()
        c = config
        channels, kernels, dilations = c.enc_channels, c.enc_kernel_sizes, c.enc_dilations
        blocks: list[nn.Module] = [TDNN(c.mel_dim, channels[0], kernels[0], dilations[0])]
        for i in range(1, len(channels) - 1):
            blocks.append(SERes2NetBlock(channels[i - 1], channels[i], c.enc_res2net_scale, c.enc_se_channels, kernels[i], dilations[i]))
        self.blocks = nn.ModuleList(blocks)
        self.mfa = TDNN(channels[-1], channels[-1], kernels[-1], dilations[-1])
        self.asp = AttentiveStatsPooling(channels[-1], c.enc_attention_channels)
        self.fc = _conv(channels[-1] * 2, c.enc_dim, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = mel.transpose(1, 2)
        outputs = []
        for block in self.blocks:
            x = block(x)
            outputs.append(x)
        x = self.mfa(torch.cat(outputs[1:], dim=1))
        return self.fc(self.asp(x))[..., 0]
