"""The Qwen3-TTS family as the registry sees it: checkpoints with config.json model_type "qwen3_tts".

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family
from vocalis.stages.models.qwen3_tts.config import MODEL_TYPE

FAMILY = checkpoint_family("qwen3_tts", (MODEL_TYPE,), __package__)
