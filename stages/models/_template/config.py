"""Configuration of the template family, read from its config.json (`from_json` for each section, `DecoderSizes.read`
for the talker's transformer sizes; `from_dir` is the entry point the loader calls). Every field comes from the file:
the sizes of a tiny checkpoint are chosen where it is built (`build.py`), those of a real one by its publisher."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vocalis.stages.api.config_json import ConfigFile, from_json
from vocalis.stages.api.decoder_sizes import DecoderSizes

MODEL_TYPE = "vocalis_tiny_tts"


@dataclass(frozen=True)
class TalkerConfig(DecoderSizes):
    """A small decoder-only transformer over UTF-8 bytes (`vocab_size` 256) that emits multi-codebook frames."""

    num_codebooks: int
    codebook_size: int
    eos_token_id: int
    """A frame whose first code is this ends the sequence."""
    bos_token_id: int
    """Text token that separates the prompt from the generated frames."""
    rope_theta: float
    max_position_embeddings: int


@dataclass(frozen=True)
class CodecConfig:
    """A small causal convolutional decoder from frames to samples."""

    num_codebooks: int
    codebook_size: int
    embed_dim: int
    channels: int
    kernel_size: int
    num_layers: int
    samples_per_frame: int
    sample_rate: int

    @property
    def receptive_field(self) -> int:
        """Frames of left context that a frame's samples depend on."""
        return self.num_layers * (self.kernel_size - 1)


@dataclass(frozen=True)
class TinyConfig(ConfigFile):
    MODEL_TYPE = MODEL_TYPE
    talker: TalkerConfig
    codec: CodecConfig

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TinyConfig:
        return cls(talker=TalkerConfig.read(data.get("talker_config"), "talker_config"),
                   codec=from_json(CodecConfig, data.get("codec_config"), where="codec_config"))
