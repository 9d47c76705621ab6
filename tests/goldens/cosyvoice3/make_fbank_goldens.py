"""Golden of the CAM++ input features: torchaudio's `compliance.kaldi.fbank` as CosyVoice calls it (80 bins, dither
0, 16 kHz, unscaled float samples), for the test clip. torchaudio's compiled library does not load beside torch
2.13, so its pure-torch kaldi.py is loaded on its own (it touches `torchaudio` only for MFCC's DCT):

    /tmp/cosy-ref/bin/pip install --no-deps torchaudio
    /tmp/cosy-ref/bin/python tests/goldens/cosyvoice3/make_fbank_goldens.py

writes fbank_goldens.safetensors beside this script.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

HERE = Path(__file__).parent


def kaldi_module():
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    site = next(Path(p) for p in sys.path if (Path(p) / "torchaudio" / "compliance" / "kaldi.py").is_file())
    spec = importlib.util.spec_from_file_location("kaldi", site / "torchaudio" / "compliance" / "kaldi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clip(seconds: float = 3.2, rate: int = 16000, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    return (0.3 * np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 2 * t) + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


def main() -> None:
    fbank = kaldi_module().fbank(torch.from_numpy(clip())[None], num_mel_bins=80, dither=0, sample_frequency=16000)
    save_file({"fbank": fbank.contiguous()}, str(HERE / "fbank_goldens.safetensors"))
    print(fbank.shape)


if __name__ == "__main__":
    main()
