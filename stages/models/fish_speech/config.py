"""S2 Pro's `config.json` (`model_type: fish_qwen3_omni`), read with its published field names: the slow AR in
`text_config`, the fast AR in `audio_decoder_config`, the semantic token range at the top level."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import from_json, read_json

MODEL_TYPE = "fish_qwen3_omni"


@dataclass(frozen=True)
class SlowARConfig:
    vocab_size: int = 155776
    dim: int = 2560
    n_head: int = 32
    n_local_heads: int = 8
    head_dim: int = 128
    n_layer: int = 36
    intermediate_size: int = 9728
    attention_qk_norm: bool = True
    rope_base: float = 1_000_000.0
    max_seq_len: int = 32768
    tie_word_embeddings: bool = True
    codebook_size: int = 4096
    num_codebooks: int = 10
    norm_eps: float = 1e-6


@dataclass(frozen=True)
class FastARConfig:
    vocab_size: int = 4096
    num_codebooks: int = 10
    dim: int = 2560
    n_head: int = 32
    n_local_heads: int = 8
    head_dim: int = 128
    n_layer: int = 4
    intermediate_size: int = 9728
    max_seq_len: int = 11
    text_dim: int = 2560
    """Width of the slow AR's hidden states (and codebook embeddings); a `project_in` maps them when it differs."""
    attention_qk_norm: bool = False
    rope_base: float = 1_000_000.0
    norm_eps: float = 1e-6


@dataclass(frozen=True)
class FishSpeechConfig:
    text: SlowARConfig
    audio_decoder: FastARConfig
    semantic_start_token_id: int = 151678
    semantic_end_token_id: int = 155773
    audio_pad_token_id: int = 151677

    @property
    def semantic_ids(self) -> range:
        return range(self.semantic_start_token_id, self.semantic_end_token_id + 1)

    @classmethod
    def from_dir(cls, path: Path) -> FishSpeechConfig:
        return cls.from_dict(read_json(path, MODEL_TYPE))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FishSpeechConfig:
        return from_json(cls, data, text=from_json(SlowARConfig, data.get("text_config"), aliases=NORM_EPS),
                         audio_decoder=from_json(FastARConfig, data.get("audio_decoder_config"), aliases=NORM_EPS))


NORM_EPS = {"rms_norm_eps": "norm_eps"}
"""Both spellings of the norms' epsilon are published."""
