"""The AuK family as the registry sees it: assembled checkpoints with config.json model_type "auk".

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.family import checkpoint_family

MODEL_TYPE = "auk"

FAMILY = checkpoint_family("auk", (MODEL_TYPE,), __package__)
