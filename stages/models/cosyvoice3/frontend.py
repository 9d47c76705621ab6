"""A voice to clone, as CosyVoice3 conditions on it (`cosyvoice_common/voice_prompt.py`): the CAM++ speaker embedding
(`campplus.onnx`), the prompt's speech tokens (`speech_tokenizer_v3.onnx`, onnxruntime) and its mel at the yaml's
`feat_extractor` settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vocalis.stages.components.campplus import CampPlus, onnx_session
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config
from vocalis.stages.models.cosyvoice_common.voice_prompt import PromptFrontend

MAX_REFERENCE_SECONDS = 30.0
"""The speech tokenizer's limit (the published frontend asserts it)."""
RECOMMENDED_SECONDS = (3.0, 10.0)
"""Reference lengths that clone best; the adapter warns outside them."""


class Frontend(PromptFrontend):
    def __init__(self, path: Path, config: CosyVoice3Config) -> None:
        self.config = config
        self.speech_tokenizer = onnx_session(path / "speech_tokenizer_v3.onnx")
        super().__init__("cosyvoice3", CampPlus(path / "campplus.onnx"), self.tokens, config.sample_rate, config.token_mel_ratio,
                         config.mel, MAX_REFERENCE_SECONDS)

    def tokens(self, samples_16k: np.ndarray) -> list[int]:
        """The speech tokens of 16 kHz samples (Whisper log-mel through the onnx tokenizer)."""
        feat = whisper_log_mel(torch.from_numpy(samples_16k))[None]
        inputs = self.speech_tokenizer.get_inputs()
        out = self.speech_tokenizer.run(None, {inputs[0].name: feat.numpy(), inputs[1].name: np.array([feat.shape[2]], dtype=np.int32)})[0]
        return [int(t) for t in np.asarray(out).reshape(-1)]
