"""A voice to clone, as CosyVoice3 conditions on it: the CAM++ speaker embedding (`campplus.onnx`), the prompt's
speech tokens (`speech_tokenizer_v3.onnx`) and its 24 kHz mel, computed once per clip content (on a stage thread) and
shared by every request and stored voice that uses the same clip."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.components.campplus import CampPlus, onnx_session
from vocalis.stages.components.speech_features import matcha_log_mel, whisper_log_mel
from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config

TOKENIZER_RATE = 16000
MAX_REFERENCE_SECONDS = 30.0
"""The speech tokenizer's limit (the published frontend asserts it)."""
RECOMMENDED_SECONDS = (3.0, 10.0)
"""Reference lengths that clone best; the adapter warns outside them."""


@dataclass(frozen=True, eq=False)
class VoicePrompt:
    embedding: torch.Tensor
    """[E] CAM++ speaker embedding."""
    speech_tokens: list[int]
    """The clip's speech tokens (25 Hz), cut to match the mel."""
    mel: torch.Tensor
    """[2 * len(speech_tokens), 80] log-mel of the clip at the model's rate."""


class Frontend:
    def __init__(self, path: Path, config: CosyVoice3Config) -> None:
        self.config = config
        self.campplus = CampPlus(path / "campplus.onnx")
        self.speech_tokenizer = onnx_session(path / "speech_tokenizer_v3.onnx")
        self.cache: ReferenceCache[VoicePrompt] = ReferenceCache()

    def prompt(self, samples: np.ndarray, sample_rate: int) -> VoicePrompt:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        return self.cache.get_or_make(_key(samples, sample_rate), lambda: self._encode(samples, sample_rate))

    def has_prompt(self, samples: np.ndarray, sample_rate: int) -> bool:
        """Whether the clip's prompt is cached (prompt() returns at once)."""
        return self.cache.has(_key(np.asarray(samples, dtype=np.float32).reshape(-1), sample_rate))

    def speaker_embedding(self, samples_16k: np.ndarray) -> torch.Tensor:
        return self.campplus(samples_16k)

    def speech_tokens(self, samples_16k: np.ndarray) -> list[int]:
        feat = whisper_log_mel(torch.from_numpy(samples_16k))[None]
        inputs = self.speech_tokenizer.get_inputs()
        out = self.speech_tokenizer.run(None, {inputs[0].name: feat.numpy(), inputs[1].name: np.array([feat.shape[2]], dtype=np.int32)})[0]
        return [int(t) for t in np.asarray(out).reshape(-1)]

    def _encode(self, samples: np.ndarray, sample_rate: int) -> VoicePrompt:
        seconds = len(samples) / sample_rate
        if seconds > MAX_REFERENCE_SECONDS:
            raise ValueError(f"the reference clip is {seconds:.1f} s; CosyVoice3's speech tokenizer takes at most {MAX_REFERENCE_SECONDS:.0f} s")
        at_16k = resample(samples, sample_rate, TOKENIZER_RATE)
        tokens = self.speech_tokens(at_16k)
        embedding = self.speaker_embedding(at_16k)
        at_model_rate = torch.from_numpy(resample(samples, sample_rate, self.config.sample_rate))
        mel = matcha_log_mel(at_model_rate, self.config.sample_rate, **{k: v for k, v in self.config.mel.items()})
        ratio = self.config.token_mel_ratio
        count = min(mel.shape[0] // ratio, len(tokens))
        return VoicePrompt(embedding=embedding, speech_tokens=tokens[:count], mel=mel[: ratio * count])


def _key(samples: np.ndarray, sample_rate: int) -> str:
    return content_key(samples, sample_rate, "cosyvoice3")
