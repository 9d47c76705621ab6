"""The GLM-TTS family as the registry sees it: a directory holding the published file set (llm/config.json,
flow/flow.pt + flow/config.yaml, hift/hift.pt, speech_tokenizer/, frontend/campplus.onnx, vq32k-phoneme-tokenizer/),
which has no top-level config.json (llm/config.json says only "llama").

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family
from vocalis.stages.models.glm_tts.config import FILE_SET

FAMILY = checkpoint_family("glm_tts", (), __package__, file_set=FILE_SET)
