"""Mel to waveform: the HiFT vocoder (a neural source filter, HiFi-GAN upsampling and an inverse STFT), named as the
checkpoints' `hift.pt` tensors: CosyVoice3's causal `CausalHiFTGenerator`, and CosyVoice2's centred `HiFTGenerator`
(GLM-TTS), which differs only in its convolutions' padding and the phase upsampling.

An F0 predictor reads the mel; the source module turns F0 into harmonics (phase accumulated at mel rate) plus fixed
noise indexed by absolute sample position; the generator upsamples the mel, fuses the source's STFT at each scale and
ends in magnitude and phase of an `n_fft`-point iSTFT. Every convolution is causal except `conv_pre` (reads
`conv_pre_look_right` frames ahead) and the F0 predictor's first (reads 3 ahead): a sample depends on mel frames up
to 5 after its own, so a stream decoded with that much lookahead matches a whole-utterance decode.
Weight-normed convolutions are folded at load (`stages.weights.fold_weight_norm`), so the modules hold plain weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.audio_blocks import CausalConv1d, Snake

NOISE_SECONDS = 30
"""Length of the fixed source noise, wrapped around for longer audio (the published module holds 300 s: 260 MB)."""


class LookaheadConv1d(nn.Conv1d):
    """Stride-1 conv padded with zeros on the right only: each output reads kernel - 1 frames ahead."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(F.pad(x, (0, self.kernel_size[0] - 1)))


class CausalConv1dUpsample(nn.Conv1d):
    """Nearest upsampling by `stride`, then a causal conv."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int) -> None:
        super().__init__(in_channels, out_channels, kernel_size)
        self.stride_up = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        x = F.interpolate(x, scale_factor=self.stride_up, mode="nearest")
        return super().forward(F.pad(x, (self.kernel_size[0] - 1, 0)))


class CausalConv1dDownSample(nn.Conv1d):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(F.pad(x, (self.stride[0] - 1, 0)))


def _centred(channels: int, kernel_size: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(channels, channels, kernel_size, dilation=dilation, padding=(kernel_size * dilation - dilation) // 2)


class ResBlock(nn.Module):
    """`convs1`, `convs2`, `activations1`, `activations2`: dilated Snake residual units, causal (CosyVoice3) or centred
    (CosyVoice2's HiFT, GLM-TTS)."""

    def __init__(self, channels: int, kernel_size: int, dilations: list[int], causal: bool = True) -> None:
        super().__init__()
        if causal:
            self.convs1 = nn.ModuleList(CausalConv1d(channels, channels, kernel_size, dilation=d) for d in dilations)
            self.convs2 = nn.ModuleList(CausalConv1d(channels, channels, kernel_size) for _ in dilations)
        else:
            self.convs1 = nn.ModuleList(_centred(channels, kernel_size, d) for d in dilations)
            self.convs2 = nn.ModuleList(_centred(channels, kernel_size) for _ in dilations)
        self.activations1 = nn.ModuleList(Snake(channels, flat=True) for _ in dilations)
        self.activations2 = nn.ModuleList(Snake(channels, flat=True) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv1, conv2, act1, act2 in zip(self.convs1, self.convs2, self.activations1, self.activations2, strict=True):
            x = x + conv2(act2(conv1(act1(x))))
        return x


class CausalConvRNNF0Predictor(nn.Module):
    """`condnet.{0,2,4,6,8}` (ELU between), `classifier`: mel [B, C, M] -> F0 [B, M] (Hz, non-negative)."""

    def __init__(self, num_class: int = 1, in_channels: int = 80, cond_channels: int = 512) -> None:
        super().__init__()
        layers: list[nn.Module] = [LookaheadConv1d(in_channels, cond_channels, 4), nn.ELU()]
        for _ in range(4):
            layers += [CausalConv1d(cond_channels, cond_channels, 3), nn.ELU()]
        self.condnet = nn.Sequential(*layers)
        self.classifier = nn.Linear(cond_channels, num_class)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.condnet(x).transpose(1, 2)).squeeze(-1).abs()

    @property
    def context_frames(self) -> int:
        """Frames before its own that an F0 value reads (the causal convolutions')."""
        return sum(_frames_back(conv) for conv in self.condnet if isinstance(conv, CausalConv1d))


class SineGen2(nn.Module):
    """Harmonics of F0 with phase accumulated at mel rate, plus fixed noise (uniform, as published) by sample position."""

    def __init__(self, sampling_rate: int, upsample_scale: int, harmonic_num: int, sine_amp: float, noise_std: float,
                 voiced_threshold: float, phase_upsampling: str = "nearest") -> None:
        super().__init__()
        self.sampling_rate, self.upsample_scale, self.phase_upsampling = sampling_rate, upsample_scale, phase_upsampling
        self.sine_amp, self.noise_std, self.voiced_threshold = sine_amp, noise_std, voiced_threshold
        generator = torch.Generator(device="cpu").manual_seed(0)
        rand_ini = torch.rand(1, harmonic_num + 1, generator=generator)
        rand_ini[:, 0] = 0
        self.register_buffer("harmonic_ids", torch.arange(1, harmonic_num + 2, dtype=torch.float32).view(1, 1, -1), persistent=False)
        self.register_buffer("rand_ini", rand_ini, persistent=False)
        noise = torch.rand(1, NOISE_SECONDS * sampling_rate, harmonic_num + 1, generator=generator)
        self.register_buffer("noise", noise, persistent=False)

    def fixed_noise(self, length: int, start: int = 0) -> torch.Tensor:
        """Samples [start, start + length) of the noise, wrapped around."""
        if start == 0 and length <= self.noise.shape[1]:
            return self.noise[:, :length]
        return self.noise[:, (torch.arange(length, device=self.noise.device) + start) % self.noise.shape[1]]

    def forward(self, f0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """f0 [B, T, 1] at the sample rate -> sines [B, T, H], uv [B, T, 1]."""
        sines, uv, _ = self.generate(f0)
        return sines, uv

    def generate(self, f0: torch.Tensor, offset: int = 0, cycles_before: torch.Tensor | None = None,
                 from_frame: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`forward` for f0 that starts `offset` frames into the utterance: also returns each harmonic's phase in
        cycles [B, frames, H] (float64, accumulated in order, so that a stream's pieces add up as the whole's).
        `cycles_before` [B, 1, H]: the phase accumulated before frame `from_frame` of this window (frames before it
        get an arbitrary phase: the caller does not use their samples)."""
        rad = (f0 * self.harmonic_ids / self.sampling_rate) % 1
        if offset == 0:
            rad[:, 0, :] = rad[:, 0, :] + self.rand_ini
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / self.upsample_scale, mode="linear").transpose(1, 2)
        steps = rad.double()
        if cycles_before is None:
            cycles = torch.cumsum(steps, dim=1)
        else:
            after = torch.cumsum(torch.cat([cycles_before, steps[:, from_frame:]], dim=1), dim=1)[:, 1:]
            cycles = torch.cat([torch.cumsum(steps[:, :from_frame], dim=1), after], dim=1)
        phase = cycles.to(rad.dtype) * 2 * math.pi
        phase = F.interpolate(phase.transpose(1, 2) * self.upsample_scale, scale_factor=self.upsample_scale, mode=self.phase_upsampling).transpose(1, 2)
        sines = torch.sin(phase) * self.sine_amp
        uv = (f0 > self.voiced_threshold).to(sines.dtype)
        noise_amp = uv * self.noise_std + (1 - uv) * self.sine_amp / 3
        noise = self.fixed_noise(sines.shape[1], offset * self.upsample_scale).to(sines)
        return sines * uv + noise_amp * noise, uv, cycles


class SourceModuleHnNSF(nn.Module):
    """`l_linear`: the harmonics merged into one excitation, through tanh."""

    def __init__(self, sampling_rate: int, upsample_scale: int, harmonic_num: int, sine_amp: float, add_noise_std: float,
                 voiced_threshold: float, phase_upsampling: str = "nearest") -> None:
        super().__init__()
        self.l_sin_gen = SineGen2(sampling_rate, upsample_scale, harmonic_num, sine_amp, add_noise_std, voiced_threshold, phase_upsampling)
        self.l_linear = nn.Linear(harmonic_num + 1, 1)

    def forward(self, f0: torch.Tensor) -> torch.Tensor:
        sines, _ = self.l_sin_gen(f0)
        return torch.tanh(self.l_linear(sines))

    def excite(self, f0: torch.Tensor, offset: int, cycles_before: torch.Tensor | None, from_frame: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` for a window of a stream (see `SineGen2.generate`); also returns the phase in cycles."""
        sines, _, cycles = self.l_sin_gen.generate(f0, offset, cycles_before, from_frame)
        return torch.tanh(self.l_linear(sines)), cycles


def _source_branch(n_fft: int, base_channels: int, upsample_rates: list[int], kernel_sizes: list[int],
                   dilation_sizes: list[list[int]], causal: bool) -> tuple[nn.ModuleList, nn.ModuleList]:
    """The source branch of a HiFT generator (`source_downs`, `source_resblocks`): for each upsampling step, a
    convolution that brings the source's STFT (n_fft + 2 channels at sample rate / hop) down to that step's rate and
    width, then a resblock. A causal generator pads on the left; a centred one on both sides (CosyVoice2's)."""
    downs, blocks = nn.ModuleList(), nn.ModuleList()
    factors, factor = [], 1  # STFT frames (the last step's rate) per frame of each step, last step first
    for rate in [1, *upsample_rates[::-1][:-1]]:
        factor *= rate
        factors.append(factor)
    for i, (u, k, d) in enumerate(zip(factors[::-1], kernel_sizes, dilation_sizes, strict=True)):
        channels = base_channels // 2 ** (i + 1)
        if u == 1:
            downs.append(CausalConv1d(n_fft + 2, channels, 1) if causal else nn.Conv1d(n_fft + 2, channels, 1))
        else:
            downs.append(CausalConv1dDownSample(n_fft + 2, channels, u * 2, u) if causal else nn.Conv1d(n_fft + 2, channels, u * 2, u, padding=u // 2))
        blocks.append(ResBlock(channels, k, d, causal=causal))
    return downs, blocks


class CausalHiFTGenerator(nn.Module):
    lookahead_mel = 5
    """Mel frames ahead that a sample depends on: conv_pre's 4 (look-right), the iSTFT's overlap one more."""

    def __init__(self, *, in_channels: int = 80, base_channels: int = 512, nb_harmonics: int = 8, sampling_rate: int = 24000,
                 nsf_alpha: float = 0.1, nsf_sigma: float = 0.003, nsf_voiced_threshold: float = 10,
                 upsample_rates: list[int], upsample_kernel_sizes: list[int], istft_params: dict[str, int],
                 resblock_kernel_sizes: list[int], resblock_dilation_sizes: list[list[int]],
                 source_resblock_kernel_sizes: list[int], source_resblock_dilation_sizes: list[list[int]],
                 lrelu_slope: float = 0.1, audio_limit: float = 0.99, conv_pre_look_right: int = 4,
                 f0_predictor: CausalConvRNNF0Predictor, **_unused: object) -> None:
        super().__init__()
        self._set_sizes(sampling_rate, istft_params, lrelu_slope, audio_limit, resblock_kernel_sizes, upsample_rates)
        self.m_source = SourceModuleHnNSF(sampling_rate, self.samples_per_frame, nb_harmonics, nsf_alpha, nsf_sigma, nsf_voiced_threshold)
        self.conv_pre = LookaheadConv1d(in_channels, base_channels, conv_pre_look_right + 1)
        self.ups = nn.ModuleList(
            CausalConv1dUpsample(base_channels // 2**i, base_channels // 2 ** (i + 1), k, u)
            for i, (u, k) in enumerate(zip(upsample_rates, upsample_kernel_sizes, strict=True))
        )
        self.source_downs, self.source_resblocks = _source_branch(self.n_fft, base_channels, upsample_rates, source_resblock_kernel_sizes,
                                                                  source_resblock_dilation_sizes, causal=True)
        self.resblocks = nn.ModuleList(
            ResBlock(base_channels // 2 ** (i + 1), k, d)
            for i in range(len(self.ups)) for k, d in zip(resblock_kernel_sizes, resblock_dilation_sizes, strict=True)
        )
        self.conv_post = CausalConv1d(base_channels // 2 ** len(self.ups), self.n_fft + 2, 7)
        self.register_buffer("stft_window", torch.hann_window(self.n_fft, periodic=True), persistent=False)
        self.f0_predictor = f0_predictor

    def _set_sizes(self, sampling_rate: int, istft_params: dict[str, int], lrelu_slope: float, audio_limit: float,
                   resblock_kernel_sizes: list[int], upsample_rates: list[int]) -> None:
        """The checks and sizes both generators (causal and centred) share."""
        if sampling_rate == 22050:
            raise ValueError("the 22.05 kHz HiFT (CosyVoice 1's SineGen) is not supported; CosyVoice2/3 and GLM-TTS run at 24 kHz")
        self.n_fft, self.hop = istft_params["n_fft"], istft_params["hop_len"]
        self.lrelu_slope, self.audio_limit = lrelu_slope, audio_limit
        self.num_kernels = len(resblock_kernel_sizes)
        self.upsample_rates = list(upsample_rates)
        self.samples_per_frame = int(math.prod(upsample_rates) * self.hop)

    def source(self, mel: torch.Tensor) -> torch.Tensor:
        """The excitation [B, 1, M * samples_per_frame] of mel [B, C, M]."""
        f0 = self.f0_predictor(mel.to(self.f0_predictor.classifier.weight.dtype))
        f0 = F.interpolate(f0[:, None], scale_factor=self.samples_per_frame, mode="nearest").transpose(1, 2)
        return self.m_source(f0).transpose(1, 2)

    def source_window(self, mel: torch.Tensor, offset: int, cycles_before: torch.Tensor | None,
                      from_frame: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`source` of mel frames [offset, offset + M) of an utterance, and the harmonics' phase (`SineGen2.generate`)."""
        f0 = self.f0_predictor(mel.to(self.f0_predictor.classifier.weight.dtype))
        f0 = F.interpolate(f0[:, None], scale_factor=self.samples_per_frame, mode="nearest").transpose(1, 2)
        excitation, cycles = self.m_source.excite(f0, offset, cycles_before, from_frame)
        return excitation.transpose(1, 2), cycles

    @property
    def context_frames(self) -> int:
        """A bound on the mel frames before its own that a sample reads through the generator (its convolutions,
        the source's STFT and the output's iSTFT), from the mel and from the source; the F0 predictor's not counted."""
        samples = 2 * self.n_fft
        per_step = self.samples_per_frame
        for i, up in enumerate(self.ups):
            per_step //= self.upsample_rates[i]
            blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
            steps = _frames_back(up) + max(_resblock_back(block) for block in blocks) + _resblock_back(self.source_resblocks[i])
            samples += steps * per_step + self.source_downs[i].kernel_size[0] * self.hop
        samples += (_frames_back(self.conv_post) + 1) * self.hop  # + the reflect pad's one
        return math.ceil(samples / self.samples_per_frame) + 1

    def decode(self, mel: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(source.squeeze(1), self.n_fft, self.hop, self.n_fft, window=self.stft_window, return_complex=True)
        source_spec = torch.cat([spec.real, spec.imag], dim=1)
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, self.lrelu_slope))
            if i == len(self.ups) - 1:
                x = F.pad(x, (1, 0), mode="reflect")
            x = x + self.source_resblocks[i](self.source_downs[i](source_spec))
            blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
            x = sum(block(x) for block in blocks) / self.num_kernels
        x = self.conv_post(F.leaky_relu(x))
        bins = self.n_fft // 2 + 1
        magnitude = torch.exp(x[:, :bins]).clamp(max=1e2)
        phase = torch.sin(x[:, bins:])
        audio = torch.istft(torch.polar(magnitude, phase), self.n_fft, self.hop, self.n_fft, window=self.stft_window)
        return audio.clamp(-self.audio_limit, self.audio_limit)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """Mel [B, C, M] -> samples [B, M * samples_per_frame] (the published `inference(finalize=True)`)."""
        return self.decode(mel, self.source(mel))


class ConvRNNF0Predictor(nn.Module):
    """CosyVoice2's F0 predictor: `condnet.{0,2,4,6,8}` (centred kernel-3 convolutions, ELU between), `classifier`."""

    def __init__(self, num_class: int = 1, in_channels: int = 80, cond_channels: int = 512) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for index in range(5):
            layers += [nn.Conv1d(in_channels if index == 0 else cond_channels, cond_channels, 3, padding=1), nn.ELU()]
        self.condnet = nn.Sequential(*layers)
        self.classifier = nn.Linear(cond_channels, num_class)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.condnet(x).transpose(1, 2)).squeeze(-1).abs()


class HiFTGenerator(CausalHiFTGenerator):
    """CosyVoice2's HiFT (GLM-TTS's `hift/hift.pt`): the same tensors as the causal one, but centred convolutions,
    transposed-convolution upsampling, and phase upsampled linearly. A sample depends on mel frames on both sides
    (`lookahead_mel` ahead, measured in the tests), so a stream needs that much lookahead to match a whole decode."""

    lookahead_mel = 21
    """Mel frames ahead that a sample can depend on: the F0 predictor's 5, the source's strided conv and resblocks
    (about 5.5 at 8x mel rate), the upsampled branch's resblocks (7.5 + 1.5 + 0.5); 19.5 measured, rounded up."""

    def __init__(self, *, in_channels: int = 80, base_channels: int = 512, nb_harmonics: int = 8, sampling_rate: int = 24000,
                 nsf_alpha: float = 0.1, nsf_sigma: float = 0.003, nsf_voiced_threshold: float = 10,
                 upsample_rates: list[int], upsample_kernel_sizes: list[int], istft_params: dict[str, int],
                 resblock_kernel_sizes: list[int], resblock_dilation_sizes: list[list[int]],
                 source_resblock_kernel_sizes: list[int], source_resblock_dilation_sizes: list[list[int]],
                 lrelu_slope: float = 0.1, audio_limit: float = 0.99, f0_predictor: ConvRNNF0Predictor, **_unused: object) -> None:
        nn.Module.__init__(self)
        self._set_sizes(sampling_rate, istft_params, lrelu_slope, audio_limit, resblock_kernel_sizes, upsample_rates)
        self.m_source = SourceModuleHnNSF(sampling_rate, self.samples_per_frame, nb_harmonics, nsf_alpha, nsf_sigma, nsf_voiced_threshold,
                                          phase_upsampling="linear")
        self.conv_pre = nn.Conv1d(in_channels, base_channels, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(base_channels // 2**i, base_channels // 2 ** (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(upsample_rates, upsample_kernel_sizes, strict=True))
        )
        self.source_downs, self.source_resblocks = _source_branch(self.n_fft, base_channels, upsample_rates, source_resblock_kernel_sizes,
                                                                  source_resblock_dilation_sizes, causal=False)
        self.resblocks = nn.ModuleList(
            ResBlock(base_channels // 2 ** (i + 1), k, d, causal=False)
            for i in range(len(self.ups)) for k, d in zip(resblock_kernel_sizes, resblock_dilation_sizes, strict=True)
        )
        self.conv_post = nn.Conv1d(base_channels // 2 ** len(self.ups), self.n_fft + 2, 7, padding=3)
        self.register_buffer("stft_window", torch.hann_window(self.n_fft, periodic=True), persistent=False)
        self.f0_predictor = f0_predictor


def _frames_back(conv: nn.Conv1d) -> int:
    return (conv.kernel_size[0] - 1) * conv.dilation[0]


def _resblock_back(block: ResBlock) -> int:
    return sum(_frames_back(conv) for conv in (*block.convs1, *block.convs2))


class HiFTStream:
    """One utterance's samples, vocoded a window of mel at a time, equal to the whole mel's (`forward`), for the causal
    `CausalHiFTGenerator` (its reach back bounds `context_frames`; the centred `HiFTGenerator` is not streamed this way).

    A window starts `context` frames before the first frame it emits (the generator's reach back, and the F0
    predictor's before it) and ends at least 5 frames after the last (the reach ahead); the harmonics' phase, which
    accumulates from the utterance's start, is carried from window to window, and the fixed source noise is read at
    the window's position. Per window: its frames only, whatever the utterance's length.
    """

    def __init__(self, hift: CausalHiFTGenerator) -> None:
        self.hift = hift
        self.source_context = hift.context_frames
        self.context = self.source_context + hift.f0_predictor.context_frames
        self.phase_frame = 0
        """The frame before which `cycles` holds the phase (0: none yet)."""
        self.cycles: torch.Tensor | None = None

    def window_start(self, emit: int) -> int:
        """The first mel frame of the window that emits from frame `emit`."""
        return max(0, emit - self.context)

    def samples(self, mel: torch.Tensor, emit: int, next_emit: int) -> torch.Tensor:
        """Mel [B, C, M] of frames [window_start(emit), ...) -> samples [B, (frames - emit) * samples_per_frame] of
        frames [emit, ...); the next call emits from `next_emit` (this one's phase is kept to there)."""
        offset = self.window_start(emit)
        if self.phase_frame < offset + (self.context - self.source_context if offset else 0):
            raise ValueError(f"a window from frame {offset} needs the phase from frame {self.phase_frame}: emit in order")
        source, cycles = self.hift.source_window(mel, offset, self.cycles, self.phase_frame - offset)
        audio = self.hift.decode(mel, source)
        keep = max(0, next_emit - self.source_context)
        if keep > self.phase_frame:
            self.cycles = cycles[:, keep - 1 - offset : keep - offset]
            self.phase_frame = keep
        return audio[:, (emit - offset) * self.hift.samples_per_frame :]
