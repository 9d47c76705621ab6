"""A voice to clone, as GLM-TTS conditions on it (`cosyvoice_common/voice_prompt.py`): the CAM++ speaker embedding
(`frontend/campplus.onnx`), the clip's speech tokens (`speech_tokenizer/`, the LM's and the flow's prompt) and its
24 kHz mel (the flow's prompt, at the published frontend's settings)."""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.components.campplus import CampPlus
from vocalis.stages.models.cosyvoice_common.voice_prompt import PromptFrontend
from vocalis.stages.models.glm_tts.config import SPEECH_TOKENIZER_DIR, GLMTTSConfig
from vocalis.stages.models.glm_tts.speech_tokenizer import SpeechTokenizer

MAX_REFERENCE_SECONDS = 30.0
"""The speech tokenizer's window (1500 encoder frames)."""
RECOMMENDED_SECONDS = (3.0, 10.0)
"""Reference lengths that clone best (the model card's 3-10 s); the adapter warns outside them."""
PROMPT_MEL = {"n_fft": 1920, "num_mels": 80, "hop_size": 480, "win_size": 1920, "fmin": 0, "fmax": 8000, "center": False}
"""The published 24 kHz frontend's mel (50 Hz)."""


class Frontend(PromptFrontend):
    def __init__(self, path: Path, config: GLMTTSConfig, threads: int = 1) -> None:
        self.config = config
        self.speech_tokenizer = SpeechTokenizer(path / SPEECH_TOKENIZER_DIR)
        super().__init__("glm_tts", CampPlus(path / "frontend" / "campplus.onnx", threads), self.speech_tokenizer,
                         config.sample_rate, config.token_mel_ratio, PROMPT_MEL, MAX_REFERENCE_SECONDS)
