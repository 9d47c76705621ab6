"""The Fish Speech S2 Pro family as the registry sees it: checkpoints with config.json model_type "fish_qwen3_omni".

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family
from vocalis.stages.models.fish_speech.config import MODEL_TYPE

# The DAC also encodes the reference clips (the voices stage) and stays float32.
FAMILY = checkpoint_family("fish_speech", (MODEL_TYPE,), __package__, float32_stages=("dac_decoder",))
