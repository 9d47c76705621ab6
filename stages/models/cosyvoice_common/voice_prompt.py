"""A voice to clone, as CosyVoice3 and GLM-TTS condition on it: the CAM++ speaker embedding, the clip's speech tokens
(the LM's and the flow's prompt) and its mel at the model's rate (the flow's prompt), computed once per clip content
on the PrepareStage's thread and shared by every request and stored voice that uses the same clip; and the stage-0
input both families' adapters make. Each family gives its own speech tokenizer and mel settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.api.standard_adapter import Prologue
from vocalis.stages.components.campplus import CampPlus
from vocalis.stages.components.speech_features import matcha_log_mel
from vocalis.stages.models.cosyvoice_common.flow_vocoder import FlowConditioning
from vocalis.stages.models.cosyvoice_common.ras_params import RASParams
from vocalis.stages.runtime.prepare import Preparer
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import CacheStats

TOKENIZER_RATE = 16000
"""The rate the speech tokenizers and CAM++ hear."""


@dataclass(frozen=True, eq=False)
class VoicePrompt:
    embedding: torch.Tensor
    """[192] CAM++ speaker embedding."""
    speech_tokens: list[int]
    """The clip's speech tokens (25 Hz), cut to match the mel."""
    mel: torch.Tensor
    """[token_mel_ratio * len(speech_tokens), 80] log-mel of the clip at the model's rate."""

    @cached_property
    def flow_conditioning(self) -> FlowConditioning:
        """The flow's conditioning on this voice: one object per voice, which the flow's primed voices are keyed by."""
        return FlowConditioning(torch.tensor(self.speech_tokens, dtype=torch.long, device="cpu"), self.mel, self.embedding)


@dataclass(frozen=True, eq=False)
class CloneInput:
    """Stage-0 input of a session, made by the adapter."""

    ref_text: str
    samples: np.ndarray | None
    """The clip to clone (mono float32), unless `voice` is given."""
    sample_rate: int
    sampling: SamplingParams
    """The standard sampler's settings, and seed; its max_new_tokens is replaced by the text-length rule unless set."""
    ras: RASParams | None = RASParams()
    """RAS sampling (the default); None: the standard sampler."""
    max_new_tokens: int | None = None
    initial_codec_chunk_frames: int | None = None
    voice: VoicePrompt | None = None
    """The prompt already encoded (tests, precomputed voices)."""


def clone_input(
    request: Prologue, sampling: SamplingParams, ras: RASParams | None, initial_codec_chunk_frames: int | None = None
) -> CloneInput:
    """The stage-0 input an adapter makes of a checked request, whose reference both families require."""
    reference = request.reference
    assert reference is not None  # the families' ReferencePolicy requires it
    return CloneInput(
        ref_text=(reference.text or "").strip(),
        samples=np.asarray(reference.samples, dtype=np.float32).reshape(-1),
        sample_rate=int(reference.sample_rate),
        sampling=sampling,
        ras=ras,
        max_new_tokens=request.max_new_tokens,
        initial_codec_chunk_frames=initial_codec_chunk_frames,
    )


class PromptFrontend:
    """A clip to its `VoicePrompt`, cached by content. `speech_tokens` maps 16 kHz samples to the clip's 25 Hz tokens;
    `mel` are `matcha_log_mel`'s settings at `sample_rate`, `token_mel_ratio` mel frames a token."""

    def __init__(self, family: str, campplus: CampPlus, speech_tokens: Callable[[np.ndarray], list[int]], sample_rate: int,
                 token_mel_ratio: int, mel: Mapping[str, Any], max_seconds: float) -> None:
        self.family, self.campplus, self.speech_tokens = family, campplus, speech_tokens
        self.sample_rate, self.token_mel_ratio, self.mel, self.max_seconds = sample_rate, token_mel_ratio, dict(mel), max_seconds
        self.cache: ReferenceCache[VoicePrompt] = ReferenceCache()

    def prompt(self, samples: np.ndarray, sample_rate: int) -> VoicePrompt:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        return self.cache.get_or_make(self._key(samples, sample_rate), lambda: self._encode(samples, sample_rate))

    def has_prompt(self, samples: np.ndarray, sample_rate: int) -> bool:
        """Whether the clip's prompt is cached (prompt() returns at once)."""
        return self.cache.has(self._key(np.asarray(samples, dtype=np.float32).reshape(-1), sample_rate))

    def _key(self, samples: np.ndarray, sample_rate: int) -> str:
        return content_key(samples, sample_rate, self.family)

    def _encode(self, samples: np.ndarray, sample_rate: int) -> VoicePrompt:
        seconds = len(samples) / sample_rate
        if seconds > self.max_seconds:
            raise ValueError(f"the reference clip is {seconds:.1f} s; the speech tokenizer takes at most {self.max_seconds:.0f} s")
        at_16k = resample(samples, sample_rate, TOKENIZER_RATE)
        tokens = self.speech_tokens(at_16k)
        embedding = self.campplus(at_16k)
        mel = matcha_log_mel(torch.from_numpy(resample(samples, sample_rate, self.sample_rate)), self.sample_rate, **self.mel)
        ratio = self.token_mel_ratio
        count = min(mel.shape[0] // ratio, len(tokens))
        return VoicePrompt(embedding=embedding, speech_tokens=tokens[:count], mel=mel[: ratio * count])


class VoicePreparer(Preparer):
    """Encodes a request's clip on the PrepareStage's thread (kept by content: a session's utterances and a stored
    voice's requests share it)."""

    def __init__(self, frontend: PromptFrontend) -> None:
        self.frontend = frontend

    def costly(self, request: SynthesisRequest[CloneInput]) -> bool:
        inputs = request.stage_input
        return inputs.voice is None and not self.frontend.has_prompt(inputs.samples, inputs.sample_rate)

    def caches(self) -> dict[str, CacheStats]:
        return self.frontend.cache.caches()

    def prepare(self, request: SynthesisRequest[CloneInput]) -> VoicePrompt:
        inputs = request.stage_input
        if inputs.voice is not None:
            return inputs.voice
        return self.frontend.prompt(inputs.samples, inputs.sample_rate)


def conditioning(request: SynthesisRequest[CloneInput]) -> FlowConditioning:
    """The flow's conditioning of a request: its prepared prompt's speech tokens, mel and speaker embedding."""
    voice: VoicePrompt = request.prepared
    return voice.flow_conditioning
