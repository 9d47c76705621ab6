"""OmniVoice's configuration, read from the checkpoint's own files.

A checkpoint directory holds `config.json` (model_type "omnivoice": the audio vocabulary and
the Qwen3 backbone in `llm_config`), `tokenizer.json`, and `audio_tokenizer/config.json`
(model_type "higgs_audio_v2_tokenizer": a DAC acoustic codec, a HuBERT semantic model and a
residual vector quantizer). Only the settings that change the computation are read; the rest
(training losses, dropout) is ignored. GenerationConfig holds the decoding defaults of the
reference implementation, which requests may override.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import from_json, read_json
from vocalis.stages.api.decoder_sizes import DecoderSizes
from vocalis.stages.components.higgs_audio_v2_tokenizer.config import AudioTokenizerConfig, DacConfig, HubertConfig

__all__ = ["AudioTokenizerConfig", "BackboneConfig", "DacConfig", "GenerationConfig", "HubertConfig", "OmniVoiceConfig"]

MODEL_TYPE = "omnivoice"


@dataclass(frozen=True)
class BackboneConfig(DecoderSizes):
    """The Qwen3 decoder stack, run with a bidirectional mask (`llm_config`)."""

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
        return cls.read(data, "llm_config", rope_theta=float(rope.get("rope_theta", data.get("rope_theta", 1000000.0))))


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
        data = read_json(path, MODEL_TYPE)
        return from_json(cls, data, llm=BackboneConfig.from_dict(data["llm_config"]))


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
