"""The Fish Audio Drama 3 family as the registry sees it: checkpoints with config.json model_type "fish_omni".

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family

MODEL_TYPE = "fish_omni"
"""The same string as config.MODEL_TYPE (that module imports torch-backed layers, so it is not imported here)."""

# The DAC also encodes the reference clips (the voices stage) and stays float32.
FAMILY = checkpoint_family("drama3", (MODEL_TYPE,), __package__, float32_stages=("dac_decoder",))
