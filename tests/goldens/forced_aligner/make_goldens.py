"""Record transformers' Wav2Vec2ForCTC on the tiny aligner checkpoints (tests/stages/text/aligner/tiny_ctc.py).

Run by hand in a venv that has torch and transformers (never the project's venv, never in CI):

    /work/refvenv/tf/bin/python tests/goldens/forced_aligner/make_goldens.py

The checkpoints are built by the project's own venv (.venv/bin/python tests/stages/text/aligner/tiny_ctc.py),
loaded here with `Wav2Vec2ForCTC.from_pretrained` (which must find every tensor and nothing more),
and run on tiny_ctc.golden_input() through `Wav2Vec2FeatureExtractor` as a user would. Writes
goldens.npz beside itself: per variant, the logits [frames, vocab].
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def main() -> None:
    goldens = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("base", "large"):
            path = Path(tmp) / variant
            subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "tests/stages/text/aligner/tiny_ctc.py", str(path), variant],
                           check=True, cwd=ROOT)
            model, info = Wav2Vec2ForCTC.from_pretrained(str(path), output_loading_info=True)
            assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
            model.eval()
            extractor = Wav2Vec2FeatureExtractor.from_pretrained(str(path))
            audio = golden_input()
            inputs = extractor(audio, sampling_rate=16000, return_tensors="pt")
            with torch.inference_mode():
                goldens[f"{variant}_logits"] = model(inputs.input_values).logits[0].numpy()
            print(variant, goldens[f"{variant}_logits"].shape)
    np.savez_compressed(HERE / "goldens.npz", **goldens)


def golden_input(seconds: float = 0.25, seed: int = 1) -> np.ndarray:
    """tiny_ctc.golden_input, repeated here because this venv cannot import the project."""
    t = np.arange(int(16000 * seconds)) / 16000
    rng = np.random.default_rng(seed)
    return (0.5 * np.sin(2 * np.pi * (200 + 800 * t) * t) + 0.05 * rng.standard_normal(len(t))).astype(np.float32)


if __name__ == "__main__":
    main()
