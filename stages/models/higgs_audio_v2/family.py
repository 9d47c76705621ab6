"""The higgs-audio v2 family as the registry sees it: config.json model_type "higgs_audio_v2" (the layout transformers
and vLLM-Omni use) or "higgs_audio" (Boson's original release).

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family

NATIVE_MODEL_TYPE = "higgs_audio_v2"
BOSON_MODEL_TYPE = "higgs_audio"

FAMILY = checkpoint_family("higgs_audio_v2", (NATIVE_MODEL_TYPE, BOSON_MODEL_TYPE), __package__)
