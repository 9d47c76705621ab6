"""The CosyVoice3 family as the registry sees it: a `config.json` with model_type "cosyvoice3" (vLLM-Omni's), or
a directory holding the published file set (cosyvoice3.yaml, llm.pt, flow.pt, hift.pt, the ONNX frontend,
CosyVoice-BlankEN/), which has no config.json of its own.

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family
from vocalis.stages.models.cosyvoice3.config import FILE_SET, MODEL_TYPE

FAMILY = checkpoint_family("cosyvoice3", (MODEL_TYPE,), __package__, file_set=FILE_SET, prompt_cache_stages=("flow",))
