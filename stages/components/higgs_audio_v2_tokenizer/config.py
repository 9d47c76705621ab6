"""The Higgs Audio v2 tokenizer's configuration, read from its own `config.json` (model_type "higgs_audio_v2_tokenizer").

A DAC acoustic codec, a HuBERT semantic model and a residual vector quantizer. Only the settings that change the
computation are read; the rest (training losses, dropout) is ignored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import from_json
from vocalis.stages.components.wav2vec2 import Wav2Vec2Config as HubertConfig

AUDIO_TOKENIZER_TYPE = "higgs_audio_v2_tokenizer"


@dataclass(frozen=True)
class DacConfig:
    """The acoustic codec (`acoustic_model_config`, model_type "dac")."""

    encoder_hidden_size: int = 64
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2, 3)
    decoder_hidden_size: int = 1024
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2, 3)
    hidden_size: int = 256
    """Channels of the latent between encoder and decoder."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DacConfig:
        down = tuple(data.get("downsampling_ratios", (8, 5, 4, 2, 3)))
        encoder_hidden = data.get("encoder_hidden_size", 64)
        return cls(
            encoder_hidden_size=encoder_hidden,
            downsampling_ratios=down,
            decoder_hidden_size=data.get("decoder_hidden_size", 1024),
            # transformers derives these when a config leaves them out; written ones win
            upsampling_ratios=tuple(data.get("upsampling_ratios", down[::-1])),
            hidden_size=data.get("hidden_size", encoder_hidden * 2 ** len(down)),
        )

    @property
    def hop_length(self) -> int:
        return math.prod(self.downsampling_ratios)


@dataclass(frozen=True)
class AudioTokenizerConfig:
    """The Higgs Audio v2 tokenizer: codes at `frame_rate` Hz to and from `sample_rate` Hz audio."""

    acoustic: DacConfig = field(default_factory=DacConfig)
    semantic: HubertConfig = field(default_factory=HubertConfig)
    sample_rate: int = 24000
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    target_bandwidths: tuple[float, ...] = (0.5, 1, 1.5, 2)
    codebook_size: int = 1024
    codebook_dim: int = 64
    kernel_size: int = 3
    channel_ratios: tuple[float, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    unit_kernel_size: int = 3

    @classmethod
    def from_dir(cls, path: Path) -> AudioTokenizerConfig:
        data = json.loads((path / "config.json").read_text())
        if data.get("model_type") != AUDIO_TOKENIZER_TYPE:
            raise ValueError(f"{path}: model_type is {data.get('model_type')!r}, not {AUDIO_TOKENIZER_TYPE!r}")
        return from_json(
            cls, data,
            acoustic=DacConfig.from_dict(data.get("acoustic_model_config") or {}),
            semantic=_hubert_config(data.get("semantic_model_config") or {}),
        )

    @property
    def hop_length(self) -> int:
        return self.acoustic.hop_length

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def hidden_size(self) -> int:
        """Width of the joint acoustic + semantic latent that the quantizer codes."""
        return self.acoustic.hidden_size + self.semantic.hidden_size

    @property
    def num_quantizers(self) -> int:
        """Codebooks at the highest bandwidth (the ones the model was trained on)."""
        bits = math.ceil(math.log2(self.codebook_size))
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * bits))

    @property
    def semantic_downsample_factor(self) -> int:
        return int(self.hop_length / (self.sample_rate / self.semantic_sample_rate) / self.downsample_factor)


def _hubert_config(data: dict[str, Any]) -> HubertConfig:
    """The semantic model (`semantic_model_config`, model_type "hubert"): HuBERT base only."""
    checks = {
        "feat_extract_norm": ("group", "only group-normed feature extractors (HuBERT base) are supported"),
        "do_stable_layer_norm": (False, "only post-norm encoders (HuBERT base) are supported"),
    }
    for key, (wanted, why) in checks.items():
        if data.get(key, wanted) != wanted:
            raise ValueError(f"semantic_model_config.{key} = {data[key]!r}: {why}")
    return HubertConfig.from_dict(data, "semantic_model_config")
