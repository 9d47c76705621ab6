"""S2 Pro's `config.json` (`model_type: fish_qwen3_omni`), read with its published field names: the slow AR in
`text_config`, the fast AR in `audio_decoder_config`, the semantic token range at the top level. Both ARs are
`DecoderSizes` read through Fish Audio's spelling (`dim`, `n_head`, `n_local_heads`, `n_layer`); a key that a
checkpoint's config.json leaves out takes S2 Pro's published value, kept as data in the same layout
(`s2_pro_config.json`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import ConfigFile, from_json
from vocalis.stages.api.decoder_sizes import DecoderSizes
from vocalis.stages.models.fish_common.semantic_tokens import SemanticTokens

MODEL_TYPE = "fish_qwen3_omni"
S2_PRO = Path(__file__).with_name("s2_pro_config.json")
"""S2 Pro's published geometry, in config.json's own sections and spelling."""
ALIASES = {"dim": "hidden_size", "n_head": "num_attention_heads", "n_local_heads": "num_key_value_heads",
           "n_layer": "num_hidden_layers", "rms_norm_eps": "norm_eps"}
"""Fish Audio's spelling of the transformer sizes; both spellings of the norms' epsilon are published."""


@dataclass(frozen=True)
class SlowARConfig(DecoderSizes):
    attention_qk_norm: bool
    rope_base: float
    max_seq_len: int
    tie_word_embeddings: bool
    codebook_size: int
    num_codebooks: int
    norm_eps: float


@dataclass(frozen=True)
class FastARConfig(DecoderSizes):
    num_codebooks: int
    max_seq_len: int
    text_dim: int
    """Width of the slow AR's hidden states (and codebook embeddings); a `project_in` maps them when it differs."""
    attention_qk_norm: bool
    rope_base: float
    norm_eps: float


@dataclass(frozen=True)
class FishSpeechConfig(SemanticTokens, ConfigFile):
    MODEL_TYPE = MODEL_TYPE
    text: SlowARConfig
    audio_decoder: FastARConfig
    audio_pad_token_id: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FishSpeechConfig:
        published = json.loads(S2_PRO.read_text())
        text, audio = (_named(published[k]) | _named(data.get(k)) for k in ("text_config", "audio_decoder_config"))
        return from_json(cls, published | dict(data), where="config.json", text=SlowARConfig.read(text, "text_config"),
                         audio_decoder=FastARConfig.read(audio, "audio_decoder_config"))


def _named(section: dict[str, Any] | None) -> dict[str, Any]:
    """A section's keys under the fields' names (the field's own spelling wins over an alias, as in `from_json`)."""
    section = section or {}
    return {ALIASES[k]: v for k, v in section.items() if k in ALIASES} | {k: v for k, v in section.items() if k not in ALIASES}
