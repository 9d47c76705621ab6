"""Cloned voices of a Base checkpoint: a clip's x-vector (speaker encoder) and ICL reference codes (Mimi encoder).

The adapter only checks what a clone request asks for and packages it (`CloneSpec`); the encoders run
here, on a stage thread: the pipeline's PrepareStage (`VoiceCloner.prepare`) or, in a pipeline without
one, the talker's `start()`. Encodings are kept by the clip's content, so a session's utterances and a
voice used again are encoded once. Precomputed artifacts of a stored voice skip the encoders.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.components.speech_features import matcha_log_mel
from vocalis.stages.models.qwen3_tts.prompt import Conditioning
from vocalis.stages.models.qwen3_tts.speaker import SPEAKER_MEL
from vocalis.stages.models.qwen3_tts.weights import Qwen3TTSModules
from vocalis.stages.runtime.prepare import Preparer
from vocalis.stages.runtime.request import ReferenceAudio, SynthesisRequest
from vocalis.stages.runtime.stage import CacheStats

if TYPE_CHECKING:
    from vocalis.stages.models.qwen3_tts.runtime import Qwen3TTSInput

ARTIFACT_XVECTOR = "speaker_embedding"
ARTIFACT_CODES = "ref_codes"


@dataclass(frozen=True)
class CloneSpec:
    """A validated clone request, made by the adapter: what to encode, nothing encoded yet."""

    reference: ReferenceAudio | None
    """The clip (or stored voice) to clone, None when only a speaker embedding was given."""
    speaker_embedding: torch.Tensor | None = None
    """[H] embedding the caller gave; it wins over the clip's."""
    icl: bool = False
    """In-context cloning: the clip's codes and transcript go into the prompt (else x-vector only)."""


@dataclass(frozen=True)
class ClonedVoice:
    xvector: torch.Tensor
    """[H] speaker embedding."""
    ref_codes: torch.Tensor | None
    """[R, G] codes of the clip, for ICL cloning."""


def voice_artifacts(modules: Qwen3TTSModules, samples: np.ndarray, rate: int, xvector: bool = True,
                    codes: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:
    """A clip's x-vector [H] (speaker encoder) and reference codes [T, G] (Mimi encoder)."""
    vector = None
    if xvector and modules.speaker_encoder is not None:
        audio = torch.from_numpy(resample(samples, rate, modules.config.speaker_encoder.sample_rate))
        device = next(modules.speaker_encoder.parameters()).device
        vector = modules.speaker_encoder(matcha_log_mel(audio.to(device), **SPEAKER_MEL)[None])[0].float().cpu().numpy()
    ref_codes = None
    if codes and modules.encoder is not None:
        audio = torch.from_numpy(resample(samples, rate, modules.config.speech_tokenizer.input_sample_rate))
        device = next(modules.encoder.parameters()).device
        ref_codes = modules.encoder(audio.to(device)[None])[0].cpu().numpy()
    return vector, ref_codes


class VoiceCloner(Preparer):
    """The Preparer of Qwen3-TTS: encodes a clone request's clip once, on a stage thread."""

    def __init__(self, modules: Qwen3TTSModules, cache: ReferenceCache[np.ndarray] | None = None) -> None:
        self.modules = modules
        self.cache: ReferenceCache[np.ndarray] = cache or ReferenceCache()

    def prepare(self, request: SynthesisRequest[Qwen3TTSInput]) -> ClonedVoice | None:
        clone = request.stage_input.clone
        return self.voice(clone) if clone is not None else None

    def costly(self, request: SynthesisRequest[Qwen3TTSInput]) -> bool:
        clone = request.stage_input.clone
        if clone is None:
            return False
        return any(not self._has(clone, what) for what in ("xvector", "codes"))

    def caches(self) -> dict[str, CacheStats]:
        return self.cache.caches()

    def _has(self, clone: CloneSpec, what: str) -> bool:
        """Whether the clip's `what` is given, stored with the voice, cached, or not needed."""
        if what == "xvector" and clone.speaker_embedding is not None or what == "codes" and not clone.icl:
            return True
        reference = clone.reference
        if reference is None:
            return True  # nothing to encode: voice() says what is missing
        if reference.artifacts.get(ARTIFACT_XVECTOR if what == "xvector" else ARTIFACT_CODES) is not None:
            return True
        samples = np.asarray(reference.samples, dtype=np.float32).reshape(-1)
        return self.cache.has(content_key(samples, reference.sample_rate, what))

    def conditioning(self, request: SynthesisRequest[Qwen3TTSInput]) -> Conditioning:
        """The request's conditioning with its cloned voice filled in (prepared already, or encoded now)."""
        inputs = request.stage_input
        if inputs.clone is None:
            return inputs.conditioning
        if request.prepared is None:
            request.prepared = self.voice(inputs.clone)
        voice: ClonedVoice = request.prepared
        return dataclasses.replace(inputs.conditioning, xvector=voice.xvector, ref_codes=voice.ref_codes)

    def voice(self, clone: CloneSpec) -> ClonedVoice:
        reference = clone.reference
        artifacts: dict[str, Any] = reference.artifacts if reference is not None else {}
        xvector = clone.speaker_embedding
        if xvector is None:
            stored = artifacts.get(ARTIFACT_XVECTOR)
            xvector = torch.as_tensor(np.asarray(stored if stored is not None else self._encoded(reference, "xvector")),
                                      dtype=torch.float32)
        codes = None
        if clone.icl:
            stored = artifacts.get(ARTIFACT_CODES)
            codes = torch.as_tensor(np.asarray(stored if stored is not None else self._encoded(reference, "codes")), dtype=torch.long)
        return ClonedVoice(xvector.reshape(-1), codes)

    def _encoded(self, reference: ReferenceAudio | None, what: str) -> np.ndarray:
        if reference is None:
            raise ValueError("a clone request with neither a clip nor a speaker embedding reached the talker")
        samples = np.asarray(reference.samples, dtype=np.float32).reshape(-1)
        key = content_key(samples, reference.sample_rate, what)

        def encode() -> np.ndarray:
            vector, codes = voice_artifacts(self.modules, samples, reference.sample_rate, xvector=what == "xvector", codes=what == "codes")
            value = vector if what == "xvector" else codes
            if value is None:
                raise ValueError(f"this checkpoint has no encoder for the clip's {what}")
            return value

        return self.cache.get_or_make(key, encode)
