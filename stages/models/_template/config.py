"""Configuration of the template family, read from its config.json (`from_json` for each section; `from_dir` is the
entry point the loader calls)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vocalis.stages.api.config_json import from_json, read_json

MODEL_TYPE = "vocalis_tiny_tts"


@dataclass(frozen=True)
class TalkerConfig:
    """A small decoder-only transformer over UTF-8 bytes that emits multi-codebook frames."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    text_vocab_size: int = 256
    num_codebooks: int = 4
    codebook_size: int = 64
    eos_token_id: int = 0
    """A frame whose first code is this ends the sequence."""
    bos_token_id: int = 1
    """Text token that separates the prompt from the generated frames."""
    rope_theta: float = 10000.0
    max_position_embeddings: int = 1024


@dataclass(frozen=True)
class CodecConfig:
    """A small causal convolutional decoder from frames to samples."""

    num_codebooks: int = 4
    codebook_size: int = 64
    embed_dim: int = 32
    channels: int = 32
    kernel_size: int = 3
    num_layers: int = 3
    samples_per_frame: int = 160
    sample_rate: int = 16000

    @property
    def receptive_field(self) -> int:
        """Frames of left context that a frame's samples depend on."""
        return self.num_layers * (self.kernel_size - 1)


@dataclass(frozen=True)
class TinyConfig:
    talker: TalkerConfig = field(default_factory=TalkerConfig)
    codec: CodecConfig = field(default_factory=CodecConfig)
    model_type: str = MODEL_TYPE

    @classmethod
    def from_dir(cls, path: Path) -> TinyConfig:
        data = read_json(path, MODEL_TYPE)
        return from_json(cls, data, talker=from_json(TalkerConfig, data["talker_config"]), codec=from_json(CodecConfig, data["codec_config"]))

    def to_json(self) -> str:
        return json.dumps(
            {"model_type": self.model_type, "talker_config": asdict(self.talker), "codec_config": asdict(self.codec)}, indent=2
        )
