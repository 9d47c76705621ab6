"""Spectral features that speech frontends compute from a reference clip, written once for every family: Kaldi fbank
(CAM++ speaker embeddings), Whisper's log-mel (S3 speech tokenizers, AuK's audio tower) and the Matcha/HiFi-GAN
log-mel (flow-matching prompt mels, Qwen3-TTS's x-vector input), on the one Slaney mel filterbank. numpy/torch only;
no librosa or torchaudio.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F


def _hz_to_mel_slaney(hz: np.ndarray) -> np.ndarray:
    hz = np.asanyarray(hz, dtype=np.float64)
    log_region = hz >= 1000.0
    return np.where(log_region, 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (math.log(6.4) / 27.0), hz / (200.0 / 3))


def _mel_to_hz_slaney(mel: np.ndarray) -> np.ndarray:
    mel = np.asanyarray(mel, dtype=np.float64)
    return np.where(mel >= 15.0, 1000.0 * np.exp((math.log(6.4) / 27.0) * (mel - 15.0)), (200.0 / 3) * mel)


@lru_cache(maxsize=8)
def slaney_mel_filters(sample_rate: int, n_fft: int, n_mels: int, f_min: float = 0.0, f_max: float | None = None) -> np.ndarray:
    """[n_mels, n_fft // 2 + 1] triangular filters, Slaney scale and area normalisation (librosa's defaults)."""
    f_max = sample_rate / 2 if f_max is None else f_max
    fft_freqs = np.linspace(0, sample_rate / 2, 1 + n_fft // 2)
    edges = _mel_to_hz_slaney(np.linspace(_hz_to_mel_slaney(f_min), _hz_to_mel_slaney(f_max), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_freqs[None, :]
    weights = np.maximum(0, np.minimum(-ramps[:-2] / widths[:-1, None], ramps[2:] / widths[1:, None]))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32)


def matcha_log_mel(samples: torch.Tensor, sample_rate: int, n_fft: int, num_mels: int, hop_size: int, win_size: int,
                   fmin: float = 0.0, fmax: float | None = None, center: bool = False) -> torch.Tensor:
    """[N] samples -> [frames, num_mels]: reflect-padded STFT magnitude, Slaney mel, natural log clamped at 1e-5."""
    pad = (n_fft - hop_size) // 2
    y = F.pad(samples.float()[None, None], (pad, pad), mode="reflect")[0]
    spec = torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size, window=torch.hann_window(win_size, device=y.device), center=center,
                      return_complex=True)
    magnitude = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
    mel = torch.from_numpy(slaney_mel_filters(sample_rate, n_fft, num_mels, fmin, fmax)).to(magnitude.device) @ magnitude
    return torch.log(mel.clamp(min=1e-5))[0].T


def whisper_log_mel(samples: torch.Tensor, n_mels: int = 128, zero_padded: bool = False) -> torch.Tensor:
    """[N] samples at 16 kHz -> [n_mels, N // 160] Whisper log-mel (100 Hz, log10, floored at max - 8, scaled).

    `zero_padded`: the clip's last frames see zeros after it, not a reflection of it, as in a reference that pads
    every clip with zeros to 30 s before the STFT (Qwen2.5-Omni's feature extractor); one window of zeros gives the
    same frames, and the floor is taken over them and the frames the zeros add."""
    frames = samples.shape[-1] // 160
    samples = samples.float()
    if zero_padded:
        samples = F.pad(samples, (0, 400))
    spec = torch.stft(samples, 400, 160, window=torch.hann_window(400, device=samples.device), return_complex=True)
    power = spec[..., :-1].abs() ** 2
    mel = torch.from_numpy(slaney_mel_filters(16000, 400, n_mels)).to(power.device) @ power
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0)[..., :frames]


@lru_cache(maxsize=4)
def _kaldi_mel_banks(num_bins: int, padded_window: int, sample_rate: float, low: float = 20.0, high: float = 0.0) -> np.ndarray:
    def mel(hz: np.ndarray | float) -> np.ndarray:
        return 1127.0 * np.log(1.0 + np.asarray(hz) / 700.0)

    high = sample_rate / 2 + high if high <= 0 else high
    fft_bins = padded_window // 2
    fft_mel = mel(np.arange(fft_bins) * sample_rate / padded_window)
    delta = (mel(high) - mel(low)) / (num_bins + 1)
    left = mel(low) + np.arange(num_bins)[:, None] * delta
    center, right = left + delta, left + 2 * delta
    up = (fft_mel[None] - left) / (center - left)
    down = (right - fft_mel[None]) / (right - center)
    banks = np.maximum(0.0, np.minimum(up, down))
    return np.pad(banks, ((0, 0), (0, 1))).astype(np.float32)  # the Nyquist bin gets no weight, as Kaldi's


def kaldi_fbank(samples: torch.Tensor, num_mel_bins: int = 80, sample_rate: int = 16000) -> torch.Tensor:
    """Kaldi's fbank (torchaudio.compliance.kaldi.fbank with dither 0 and its other defaults) of [N] float samples, as
    CosyVoice passes them (unscaled): [frames, num_mel_bins] log mel energies, 25 ms povey windows every 10 ms."""
    waveform = samples.float()
    length, shift = int(sample_rate * 0.025), int(sample_rate * 0.010)
    if len(waveform) < length:
        return torch.zeros(0, num_mel_bins, device=waveform.device)
    frames = waveform.unfold(0, length, shift)
    frames = frames - frames.mean(dim=1, keepdim=True)
    frames = torch.cat([frames[:, :1] - 0.97 * frames[:, :1], frames[:, 1:] - 0.97 * frames[:, :-1]], dim=1)
    window = torch.hann_window(length, periodic=False, device=waveform.device).pow(0.85)
    padded = 1 << (length - 1).bit_length()
    spectrum = torch.fft.rfft(F.pad(frames * window, (0, padded - length)), dim=1).abs().pow(2)
    banks = torch.from_numpy(_kaldi_mel_banks(num_mel_bins, padded, float(sample_rate))).to(spectrum.device)
    return torch.clamp(spectrum @ banks.T, min=torch.finfo(torch.float32).eps).log()
