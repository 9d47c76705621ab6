"""The CAM++ speaker embedding of CosyVoice-style frontends (`campplus.onnx`, run by onnxruntime on Kaldi fbank
features with the mean removed): CosyVoice3's and GLM-TTS's voices are conditioned on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vocalis.stages.components.speech_features import kaldi_fbank


def onnx_session(path: Path, threads: int = 1):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


class CampPlus:
    def __init__(self, path: Path, threads: int = 1) -> None:
        self.session = onnx_session(path, threads)

    def __call__(self, samples_16k: np.ndarray) -> torch.Tensor:
        """[E] embedding of a clip at 16 kHz."""
        feat = kaldi_fbank(torch.from_numpy(np.asarray(samples_16k, dtype=np.float32)))
        feat = feat - feat.mean(dim=0, keepdim=True)
        out = self.session.run(None, {self.session.get_inputs()[0].name: feat[None].numpy()})[0]
        return torch.from_numpy(np.asarray(out, dtype=np.float32).reshape(-1))
