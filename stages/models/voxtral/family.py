"""The Voxtral TTS family as the registry sees it: Mistral-format checkpoints whose params.json says `voxtral_tts`.

Voxtral checkpoints have no config.json; `vocalis.stages.api.family` reads params.json instead (its `model_type`, or the
`multimodal.audio_tokenizer_args` section that only Voxtral TTS has). Kept free of torch imports.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family

MODEL_TYPE = "voxtral_tts"

# The codec is loaded in float32.
FAMILY = checkpoint_family("voxtral", (MODEL_TYPE,), __package__, float32_stages=("audio_tokenizer",))
