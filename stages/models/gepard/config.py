"""Gepard-1.0's configuration: the backbone's config.json plus the `gepard_config.json` sidecar.

The published config.json self-identifies as `qwen3_5_text` (the bare backbone), so a Gepard checkpoint is told
apart from a plain Qwen3.5 model only by the sidecar beside it: `is_gepard` says so, and nothing else is guessed.
The sidecar holds what the backbone config does not: the audio heads (one FSQ channel each, `level_audio_<i>`:
levels), the per-channel embedding size, the special tokens, the short-text repetition layout, the codec, the
voice-cloning prefix, the stop threshold and the sampling temperature. Vestigial M-RoPE keys in the backbone's
rope parameters are dropped (the model uses 1-D RoPE; for text positions the two are the same anyway).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocalis.stages.components.hybrid import HybridConfig

SIDECAR = "gepard_config.json"
BACKBONE_MODEL_TYPE = "qwen3_5_text"


def is_gepard(path: Path) -> bool:
    """A Gepard checkpoint: a `qwen3_5_text` config.json with the Gepard sidecar beside it."""
    return (path / SIDECAR).is_file() and (path / "config.json").is_file()


@dataclass(frozen=True)
class GepardConfig:
    backbone: HybridConfig
    audio_levels: tuple[int, ...]
    """Levels of each FSQ channel, in head order (32 channels: 8 codec groups x [8, 7, 6, 6])."""
    audio_embed_dim: int
    start_of_text: int
    end_of_text: int
    start_of_speech: int
    speaker_token_base: int
    """Ids speaker_token_base .. + num_speaker_prefix - 1 are the speaker slots (the voice prefix's rows)."""
    num_speaker_prefix: int
    repetition_enabled: bool
    repetition_target_tokens: int
    repetition_apply_below: int
    repetition_max_repeats: int
    codec_id: str
    """The Hub repo of the NanoCodec .nemo archive."""
    sample_rate: int
    frame_rate_hz: float
    fsq_levels: tuple[int, ...]
    num_codec_groups: int
    stop_threshold: float
    temperature: float

    @classmethod
    def from_dir(cls, path: Path) -> GepardConfig:
        config = json.loads((path / "config.json").read_text())
        if config.get("model_type") != BACKBONE_MODEL_TYPE:
            raise ValueError(f"{path}/config.json: a Gepard backbone is {BACKBONE_MODEL_TYPE!r}, not {config.get('model_type')!r}")
        sidecar = json.loads((path / SIDECAR).read_text())
        return cls.from_dict(config, sidecar, where=str(path / SIDECAR))

    @classmethod
    def from_dict(cls, config: dict[str, Any], sidecar: dict[str, Any], where: str = SIDECAR) -> GepardConfig:
        backbone = dict(config)
        rope = backbone.get("rope_parameters")
        if isinstance(rope, dict):
            backbone["rope_parameters"] = {k: v for k, v in rope.items() if k not in ("mrope_section", "mrope_interleaved")}
        heads = sidecar.get("audio_heads")
        if not heads:
            raise ValueError(f"{where}: audio_heads is missing or empty")
        levels = tuple(int(heads[k]) for k in sorted(heads, key=lambda name: int(str(name).rsplit("_", 1)[-1])))
        special = sidecar.get("special_tokens") or {}
        repetition = sidecar.get("text_repetition") or {}
        codec = sidecar.get("codec") or {}
        compressor = (sidecar.get("voice_cloning") or {}).get("compressor") or {}
        fsq = tuple(int(v) for v in codec.get("fsq_levels", [8, 7, 6, 6]))
        groups = int(codec.get("num_layers", 8))
        if levels != fsq * groups:
            raise ValueError(f"{where}: audio_heads {list(levels)} are not {groups} codec groups of fsq_levels {list(fsq)}")
        for key in ("start_of_text", "end_of_text", "start_of_speech", "tokeniser_length"):
            if key not in special:
                raise ValueError(f"{where}: special_tokens.{key} is missing")
        return cls(
            backbone=HybridConfig.from_dict(backbone),
            audio_levels=levels,
            audio_embed_dim=int(sidecar.get("audio_embed_dim", 32)),
            start_of_text=int(special["start_of_text"]),
            end_of_text=int(special["end_of_text"]),
            start_of_speech=int(special["start_of_speech"]),
            speaker_token_base=int(special["tokeniser_length"]),
            num_speaker_prefix=int(compressor.get("num_queries", 8)),
            repetition_enabled=bool(repetition.get("enabled", True)),
            repetition_target_tokens=int(repetition.get("target_text_tokens", 16)),
            repetition_apply_below=int(repetition.get("apply_below", 13)),
            repetition_max_repeats=int(repetition.get("max_repeats", 8)),
            codec_id=str(codec.get("codec_id", "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps")),
            sample_rate=int(codec.get("sample_rate", 22050)),
            frame_rate_hz=float(codec.get("frame_rate_hz", 21.5)),
            fsq_levels=fsq,
            num_codec_groups=groups,
            stop_threshold=float(sidecar.get("stop_threshold", 0.5)),
            temperature=float(sidecar.get("temperature", 0.3)),
        )

    @property
    def num_heads(self) -> int:
        return len(self.audio_levels)
