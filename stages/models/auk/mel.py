"""Whisper log-mel features of a 16 kHz clip, as Qwen2.5-Omni's feature extractor computes them for its audio tower.

The reference pads every clip with zeros to 30 s before the STFT, so the frames at a clip's end see zeros, not a
reflection; padding with one window of zeros gives the same valid frames.
"""

from __future__ import annotations

import numpy as np
import torch

N_FFT = 400
HOP = 160


def _hz_to_mel(freq: np.ndarray) -> np.ndarray:
    mels = freq / (200.0 / 3)
    log_region = freq >= 1000.0
    return np.where(log_region, 15.0 + np.log(np.maximum(freq, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), mels)


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    freq = mels * (200.0 / 3)
    log_region = mels >= 15.0
    return np.where(log_region, 1000.0 * np.exp(np.log(6.4) / 27.0 * (mels - 15.0)), freq)


def mel_filters(num_mel_bins: int, sample_rate: int = 16000) -> torch.Tensor:
    """[1 + N_FFT/2, mels] Slaney-normalised triangular filters on the Slaney mel scale, 0 to sample_rate/2."""
    mels = np.linspace(_hz_to_mel(np.array(0.0)), _hz_to_mel(np.array(sample_rate / 2)), num_mel_bins + 2)
    edges = _mel_to_hz(mels)
    fft_freqs = np.linspace(0, sample_rate // 2, 1 + N_FFT // 2)
    widths = np.diff(edges)
    slopes = edges[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    filters *= 2.0 / (edges[2: num_mel_bins + 2] - edges[:num_mel_bins])
    return torch.from_numpy(filters).float()


def log_mel(samples: torch.Tensor, filters: torch.Tensor) -> torch.Tensor:
    """[mels, len // HOP] features of mono 16 kHz samples [len]."""
    frames = samples.shape[-1] // HOP
    padded = torch.nn.functional.pad(samples.float(), (0, N_FFT))
    stft = torch.stft(padded, N_FFT, HOP, window=torch.hann_window(N_FFT, device=samples.device), return_complex=True)
    power = stft[..., :-1].abs() ** 2
    spec = torch.clamp(filters.T.to(power.device) @ power, min=1e-10).log10()
    spec = torch.maximum(spec, spec.max() - 8.0)
    return ((spec + 4.0) / 4.0)[:, :frames]
