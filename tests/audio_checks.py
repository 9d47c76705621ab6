"""Checks that decoded audio is speech, not silence or noise."""

from __future__ import annotations

import numpy as np


def speech_report(samples: np.ndarray, rate: int) -> dict[str, float]:
    """Loudness, envelope variation and spectral shape of a mono signal."""
    samples = np.asarray(samples, dtype=np.float64)
    frame = int(0.025 * rate)
    frames = samples[: len(samples) // frame * frame].reshape(-1, frame)
    frame_rms = np.sqrt(np.mean(frames**2, axis=1))
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples)))) ** 2
    freqs = np.fft.rfftfreq(len(samples), 1 / rate)
    voiced_band = spectrum[(freqs >= 80) & (freqs <= 4000)].sum() / spectrum.sum()
    power = spectrum[freqs > 0] + 1e-20
    flatness = float(np.exp(np.mean(np.log(power))) / np.mean(power))
    return {
        "rms": float(np.sqrt(np.mean(samples**2))),
        "envelope_cv": float(np.std(frame_rms) / (np.mean(frame_rms) + 1e-12)),
        "voiced_band": float(voiced_band),
        "flatness": flatness,
    }


def assert_speech(samples: np.ndarray, rate: int) -> None:
    report = speech_report(samples, rate)
    assert report["rms"] > 0.02, f"too quiet: {report}"
    assert report["envelope_cv"] > 0.4, f"no syllable structure (steady tone or noise): {report}"
    assert report["voiced_band"] > 0.7, f"energy not in the speech band: {report}"
    assert report["flatness"] < 0.1, f"spectrum flat like noise: {report}"
