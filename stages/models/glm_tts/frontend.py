"""A voice to clone, as GLM-TTS conditions on it: the CAM++ speaker embedding (`frontend/campplus.onnx`), the clip's
speech tokens (`speech_tokenizer/`, the LM's and the flow's prompt) and its 24 kHz mel (the flow's prompt), computed
once per clip content (on a stage thread) and shared by every request and stored voice that uses the same clip."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.components.campplus import CampPlus
from vocalis.stages.components.speech_features import matcha_log_mel
from vocalis.stages.models.glm_tts.config import SPEECH_TOKENIZER_DIR, GLMTTSConfig
from vocalis.stages.models.glm_tts.speech_tokenizer import RATE, SpeechTokenizer

MAX_REFERENCE_SECONDS = 30.0
"""The speech tokenizer's window (1500 encoder frames)."""
RECOMMENDED_SECONDS = (3.0, 10.0)
"""Reference lengths that clone best (the model card's 3-10 s); the adapter warns outside them."""
PROMPT_MEL = {"n_fft": 1920, "num_mels": 80, "hop_size": 480, "win_size": 1920, "fmin": 0, "fmax": 8000, "center": False}
"""The published 24 kHz frontend's mel (50 Hz)."""


@dataclass(frozen=True, eq=False)
class VoicePrompt:
    embedding: torch.Tensor
    """[192] CAM++ speaker embedding."""
    speech_tokens: list[int]
    """The clip's speech tokens (25 Hz), cut to match the mel."""
    mel: torch.Tensor
    """[token_mel_ratio * len(speech_tokens), 80] log-mel of the clip at 24 kHz."""


class Frontend:
    def __init__(self, path: Path, config: GLMTTSConfig, threads: int = 1) -> None:
        self.config = config
        self.campplus = CampPlus(path / "frontend" / "campplus.onnx", threads)
        self.speech_tokenizer = SpeechTokenizer(path / SPEECH_TOKENIZER_DIR)
        self.cache: ReferenceCache[VoicePrompt] = ReferenceCache()

    def prompt(self, samples: np.ndarray, sample_rate: int) -> VoicePrompt:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        return self.cache.get_or_make(_key(samples, sample_rate), lambda: self._encode(samples, sample_rate))

    def has_prompt(self, samples: np.ndarray, sample_rate: int) -> bool:
        """Whether the clip's prompt is cached (prompt() returns at once)."""
        return self.cache.has(_key(np.asarray(samples, dtype=np.float32).reshape(-1), sample_rate))

    def _encode(self, samples: np.ndarray, sample_rate: int) -> VoicePrompt:
        seconds = len(samples) / sample_rate
        if seconds > MAX_REFERENCE_SECONDS:
            raise ValueError(f"the reference clip is {seconds:.1f} s; GLM-TTS's speech tokenizer takes at most {MAX_REFERENCE_SECONDS:.0f} s")
        at_16k = resample(samples, sample_rate, RATE)
        tokens = self.speech_tokenizer(at_16k)
        embedding = self.campplus(at_16k)
        rate = self.config.sample_rate
        mel = matcha_log_mel(torch.from_numpy(resample(samples, sample_rate, rate)), rate, **PROMPT_MEL)
        ratio = self.config.token_mel_ratio
        count = min(mel.shape[0] // ratio, len(tokens))
        return VoicePrompt(embedding=embedding, speech_tokens=tokens[:count], mel=mel[: ratio * count])


def _key(samples: np.ndarray, sample_rate: int) -> str:
    return content_key(samples, sample_rate, "glm_tts")
