"""OmniVoice's configuration, read from the checkpoint's own files.

A checkpoint directory holds `config.json` (model_type "omnivoice": the audio vocabulary and
the Qwen3 backbone in `llm_config`), `tokenizer.json`, and `audio_tokenizer/config.json`
(model_type "higgs_audio_v2_tokenizer": a DAC acoustic codec, a HuBERT semantic model and a
residual vector quantizer). Only the settings that change the computation are read; the rest
(training losses, dropout) is ignored. GenerationConfig holds the decoding defaults of the
reference implementation, which requests may override.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vocalis.stages.config_json import from_json
from vocalis.stages.layers.wav2vec2 import Wav2Vec2Config as HubertConfig

MODEL_TYPE = "omnivoice"
AUDIO_TOKENIZER_TYPE = "higgs_audio_v2_tokenizer"


@dataclass(frozen=True)
class BackboneConfig:
    """The Qwen3 decoder stack, run with a bidirectional mask (`llm_config`)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    attention_bias: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackboneConfig:
        if data.get("model_type", "qwen3") != "qwen3":
            raise ValueError(f"llm_config.model_type is {data.get('model_type')!r}; only qwen3 backbones are supported")
        rope = data.get("rope_parameters") or data.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ValueError(f"llm_config rope_type {rope_type!r} is not supported (only 'default')")
        if data.get("use_sliding_window"):
            raise ValueError("llm_config.use_sliding_window is not supported")
        heads = data["num_attention_heads"]
        return cls(
            vocab_size=data["vocab_size"],
            hidden_size=data["hidden_size"],
            intermediate_size=data["intermediate_size"],
            num_hidden_layers=data["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=data.get("num_key_value_heads", heads),
            head_dim=data.get("head_dim") or data["hidden_size"] // heads,
            rms_norm_eps=data.get("rms_norm_eps", 1e-6),
            rope_theta=float(rope.get("rope_theta", data.get("rope_theta", 1000000.0))),
            attention_bias=bool(data.get("attention_bias", False)),
        )


@dataclass(frozen=True)
class OmniVoiceConfig:
    """The diffusion language model: audio tokens over `num_audio_codebook` codebooks on a Qwen3 backbone."""

    llm: BackboneConfig
    audio_vocab_size: int = 1025
    """Entries per codebook: the codes plus the mask id."""
    audio_mask_id: int = 1024
    num_audio_codebook: int = 8

    @classmethod
    def from_dir(cls, path: Path) -> OmniVoiceConfig:
        data = json.loads((path / "config.json").read_text())
        if data.get("model_type") != MODEL_TYPE:
            raise ValueError(f"{path}: model_type is {data.get('model_type')!r}, not {MODEL_TYPE!r}")
        return cls(
            llm=BackboneConfig.from_dict(data["llm_config"]),
            audio_vocab_size=data.get("audio_vocab_size", 1025),
            audio_mask_id=data.get("audio_mask_id", 1024),
            num_audio_codebook=data.get("num_audio_codebook", 8),
        )


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


@dataclass(frozen=True)
class GenerationConfig:
    """How one request is decoded; the defaults are the reference implementation's."""

    num_step: int = 32
    """Unmasking steps per unit (each a forward pass over the conditional and unconditional rows)."""
    guidance_scale: float = 2.0
    """Classifier-free guidance; 0 turns the unconditional branch off."""
    t_shift: float = 0.1
    """Time-step shift of the unmasking schedule (below 1: few tokens first, many at the end)."""
    layer_penalty_factor: float = 5.0
    """Confidence penalty per codebook index, so that coarse codebooks are committed first."""
    position_temperature: float = 5.0
    """Gumbel temperature of the choice of positions to commit (0: by confidence alone)."""
    class_temperature: float = 0.0
    """Gumbel temperature of the token chosen at a position (0: greedy)."""
    denoise: bool = True
    """Ask for clean speech when cloning a reference (the <|denoise|> token)."""
    audio_chunk_duration: float = 15.0
    """Seconds of speech per unit when a long text is split."""
    audio_chunk_threshold: float = 30.0
    """A text whose estimated speech is longer than this many seconds is split into units."""
    postprocess_output: bool = True
    """Shorten pauses over 0.5 s and trim each unit's edge silences to 0.1 s, as the reference does."""
    pad_duration: float = 0.1
    """Silence before the first and after the last unit, and between units, in seconds."""
    fade_duration: float = 0.1
    """Fade-in and fade-out of each unit, in seconds."""

    def with_overrides(self, values: dict[str, Any]) -> GenerationConfig:
        return replace(self, **values)


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
