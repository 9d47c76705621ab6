"""Stage 1 of VoxCPM2: latent patches to 48 kHz audio with the AudioVAE decoder, in chunks as they arrive.

The decoder is causal, so a chunk decoded with `receptive_field_frames` of left context reproduces a
whole-utterance decode. A continuation prompt's last patches precede a request's first patch as
context (decoded, never emitted), as the reference decodes them before cutting them off.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.vae import AudioVAE, receptive_field_frames
from vocalis.stages.models.voxcpm2.voices import PROMPT_DECODE_CONTEXT, VoiceEncoder
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.request import SynthesisRequest

if TYPE_CHECKING:
    from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Input


class PatchDecoder(ChunkDecoder):
    """The ChunkDecoder of the `audio_vae` stage: frames are patches [patch_size, feat_dim]."""

    causal = True

    def __init__(
        self, vae: AudioVAE, config: VoxCPM2Config, voices: VoiceEncoder, frame_dtype: torch.dtype | None = None, frame_device=None
    ) -> None:
        """`frame_dtype`/`frame_device`: those of the generator's patches, which context frames are concatenated with."""
        self.vae = vae
        self.config = config
        self.voices = voices
        self.samples_per_frame = config.samples_per_patch
        parameter = next(vae.parameters())
        self.dtype, self.device = parameter.dtype, parameter.device
        self.frame_dtype, self.frame_device = frame_dtype or self.dtype, frame_device or self.device

    @property
    def context_patches(self) -> int:
        """Patches of left context a chunk needs to match a whole-utterance decode exactly."""
        return math.ceil(receptive_field_frames(self.config.audio_vae) / self.config.patch_size)

    def start(self, request: SynthesisRequest[VoxCPM2Input]) -> DecodeStream:
        return DecodeStream(first_chunk_frames=request.stage_input.initial_codec_chunk_frames, context_frames=self.context_frames(request))

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        """[B, T, P, D] patches -> [B, T * samples_per_frame] samples."""
        b, t, p, d = frames.shape
        latents = frames.to(self.device, self.dtype).reshape(b, t * p, d).transpose(1, 2)
        return self.vae.decode(latents)

    def context_frames(self, request: SynthesisRequest[VoxCPM2Input]) -> torch.Tensor | None:
        """The last patches of a continuation prompt, decoded before the request's own as context."""
        prompt = request.stage_input.prompt
        if prompt is None:
            return None
        latents = self.voices.latents(prompt, "left")
        return latents[-min(PROMPT_DECODE_CONTEXT, len(latents)) :].to(self.frame_device, self.frame_dtype)
