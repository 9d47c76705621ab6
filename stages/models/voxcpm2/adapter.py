"""Which request fields VoxCPM2 honours, and how a request becomes its stage-0 input.

Modes, by what the request carries:
  no voice to clone                    zero-shot
  a reference without its transcript   reference clone: the clip sits between ref markers, isolated
  a reference with its transcript      continuation: the clip is the start of the utterance, its
                                       transcript precedes the text (ref_text, or the stored voice's)
  extra_params.clone_mode              forces one of "reference", "continuation", "ref_continuation"
                                       (the clip both as isolated reference and as prompt)
A stored voice may carry precomputed latents (artifacts `ref_audio_feat` / `audio_feat`, [N, patch, dim]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.voices import VoiceClip
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

CLONE_MODES = ("reference", "continuation", "ref_continuation")
MAX_NEW_TOKENS = 4096
DEFAULT_MIN_LEN = 2
"""Patches before the stop head may end an utterance (the reference's min_len: it stops after more than this)."""


@dataclass(frozen=True, eq=False)
class VoxCPM2Input:
    """Stage-0 input of one session (shared by its utterances)."""

    reference: VoiceClip | None = None
    """Isolated reference voice (between ref markers)."""
    prompt: VoiceClip | None = None
    """Continuation prompt audio; `prompt_text` is its transcript."""
    prompt_text: str = ""
    cfg_value: float = 2.0
    inference_timesteps: int = 10
    seed: int | None = None
    max_new_tokens: int | None = None
    """Patches to generate at most; None: a cap from the text length."""
    min_len: int = DEFAULT_MIN_LEN
    initial_codec_chunk_frames: int | None = None
    """Patches in the first decoded chunk (read by the chunk stage)."""
    noise: torch.Tensor | None = None
    """Flow-matching start noise to inject, [steps, feat_dim, patch_size] (parity tests); None draws it."""

    @property
    def mode(self) -> str:
        if self.reference is not None and self.prompt is not None:
            return "ref_continuation"
        if self.reference is not None:
            return "reference"
        return "continuation" if self.prompt is not None else "zero_shot"

class VoxCPM2Adapter(StandardAdapter[VoxCPM2Input]):
    MODEL = "VoxCPM2"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("cfg_value", float, "Classifier-free guidance of the LocDiT, 0 to 10 (default 2.0): higher follows the text and voice "
                   "more closely.", minimum=0, maximum=10),
        ExtraParam("inference_timesteps", int, "Flow-matching steps per patch, 1 to 100 (default 10): fewer is faster, coarser.",
                   minimum=1, maximum=100),
        ExtraParam("min_len", int, "Patches before the stop head may end the utterance, 0 to 4096 (default 2).", minimum=0, maximum=MAX_NEW_TOKENS),
        ExtraParam("clone_mode", str, "With a voice to clone: reference, continuation (needs its transcript) or ref_continuation. "
                   "Default: continuation when the transcript is known, else reference.", choices=CLONE_MODES),
    ])
    REFERENCE = ReferencePolicy(MODEL, transcript=False, audio=False)
    """Only the shared ref_text rule: which of transcript, audio or latents a clone needs depends on its clone_mode."""

    def __init__(self, config: VoxCPM2Config) -> None:
        self.config = config
        super().__init__(sample_rate=config.audio_vae.out_sample_rate, voices=Voices.single(),
                         fields={"seed", "max_new_tokens", "ref_text", "initial_codec_chunk_frames"})

    def stage_input(self, params: RequestParams) -> VoxCPM2Input:
        request = self.prologue(params)
        settings: dict[str, Any] = dict(request.extra)
        mode = settings.pop("clone_mode", None)
        common = {"seed": request.seed, "max_new_tokens": request.max_new_tokens,
                  "initial_codec_chunk_frames": request.initial_codec_chunk_frames}
        settings |= {name: value for name, value in common.items() if value is not None}
        if request.reference is None:
            if mode is not None:
                raise InvalidField("extra_params.clone_mode", "REF_AUDIO_REQUIRED", "clone_mode needs ref_audio or a cloned voice")
            return VoxCPM2Input(**settings)
        return VoxCPM2Input(**settings, **self._voice(request.reference, mode))

    def _voice(self, reference: ReferenceAudio, mode: str | None) -> dict[str, Any]:
        text = (reference.text or "").strip()
        mode = mode or ("continuation" if text else "reference")
        if mode != "reference" and not text:
            field = "voice" if reference.name else "ref_text"
            raise InvalidField(field, "REF_TEXT_REQUIRED", f"clone_mode {mode} needs the transcript of the voice's audio (ref_text)")
        artifacts = reference.artifacts or {}
        has_audio = reference.samples is not None and len(reference.samples) > 0
        field = "voice" if reference.name else "ref_audio"

        def clip(artifact: str) -> VoiceClip:
            latents = artifacts.get(artifact)
            if latents is not None:
                return VoiceClip(latents=self._latents(latents, artifact, field))
            if not has_audio:
                raise InvalidField(field, "VOICE_NOT_SUPPORTED", f"the voice has no audio (nor {artifact} latents) for VoxCPM2 to clone")
            return VoiceClip(samples=np.asarray(reference.samples, dtype=np.float32), sample_rate=int(reference.sample_rate))

        voice: dict[str, Any] = {}
        if mode in ("reference", "ref_continuation"):
            voice["reference"] = clip("ref_audio_feat")
        if mode in ("continuation", "ref_continuation"):
            voice["prompt"] = clip("audio_feat")
            voice["prompt_text"] = text
        return voice

    def _latents(self, value: Any, artifact: str, field: str) -> torch.Tensor:
        latents = torch.as_tensor(np.asarray(value, dtype=np.float32))
        shape = (self.config.patch_size, self.config.feat_dim)
        if latents.dim() != 3 or tuple(latents.shape[1:]) != shape or len(latents) == 0:
            raise InvalidField(field, "INVALID_VOICE_ARTIFACT", f"{artifact} must be [N, {shape[0]}, {shape[1]}] latents, got {tuple(latents.shape)}")
        return latents
