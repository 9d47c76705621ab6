"""The OmniVoice family as the registry sees it: checkpoints with config.json model_type "omnivoice".

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family

MODEL_TYPE = "omnivoice"

FAMILY = checkpoint_family("omnivoice", (MODEL_TYPE,), __package__)
