"""Voices to clone, as VAE latents: a reference clip (isolated between ref markers) or a continuation prompt.

A clip is encoded once, on the first request that needs it (on the generator's thread, never the
server's event loop), and kept by its content (a shared ReferenceCache), so a session's utterances and
a voice used again share one encoding. The generator reads
the latents for the prompt; the VAE decoder reads the prompt's last patches as left context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from vocalis.stages.api.reference import ReferenceCache, content_key, resample
from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.vae import AudioVAE

PROMPT_DECODE_CONTEXT = 3
"""Patches of a continuation prompt decoded before the generated ones (and cut), as the reference does."""


@dataclass(frozen=True, eq=False)
class VoiceClip:
    """Audio of a voice, or its precomputed latents."""

    samples: np.ndarray | None = None
    """Mono float32 samples."""
    sample_rate: int = 16000
    latents: torch.Tensor | None = None
    """Precomputed patch latents [N, patch_size, feat_dim] (e.g. from a precomputed voice); skips encoding."""


class VoiceEncoder:
    """Clip -> patch latents [N, P, D], padded to whole patches on the left (prompts) or right (references)."""

    def __init__(self, vae: AudioVAE, config: VoxCPM2Config) -> None:
        self.vae = vae
        self.config = config
        self.cache: ReferenceCache[torch.Tensor] = ReferenceCache()

    def latents(self, clip: VoiceClip, pad: str) -> torch.Tensor:
        if clip.latents is not None:
            return clip.latents
        key = content_key(np.asarray(clip.samples, dtype=np.float32).reshape(-1), clip.sample_rate, pad)
        return self.cache.get_or_make(key, lambda: self._encode(clip, pad))

    def _encode(self, clip: VoiceClip, pad: str) -> torch.Tensor:
        vae_config = self.config.audio_vae
        samples = np.asarray(clip.samples, dtype=np.float32).reshape(-1)
        samples = resample(samples, clip.sample_rate, vae_config.sample_rate)
        patch = self.config.patch_size
        audio = torch.from_numpy(np.ascontiguousarray(samples))[None]
        missing = -audio.shape[1] % (patch * vae_config.encoder_hop)
        audio = F.pad(audio, (missing, 0) if pad == "left" else (0, missing))
        device = next(self.vae.parameters()).device
        latents = self.vae.encode(audio.to(device))[0]  # [D, frames]
        return latents.view(latents.shape[0], -1, patch).permute(1, 2, 0).contiguous()  # [N, P, D]
