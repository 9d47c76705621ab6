"""The VoxCPM2 family as the registry sees it: checkpoints whose config.json names the VoxCPM2 architecture.

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family
from vocalis.stages.models.voxcpm2.config import ARCHITECTURE

# The audio VAE also encodes the voices' clips and stays float32.
FAMILY = checkpoint_family("voxcpm2", (ARCHITECTURE,), __package__, float32_stages=("audio_vae",))
