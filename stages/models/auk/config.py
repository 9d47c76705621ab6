"""AuK's configuration, read from the assembled checkpoint's config.json (published field names).

The assembled bundle (vLLM-Omni's `prepare_auk_checkpoint.py`) is the Qwen2.5-Omni-3B config extended with
`model_type: auk`, `dit`, `vae`, `variant`, `flash_t_grid` and `defaults`. Only the thinker's text model and audio
tower are used: the talker and token2wav parts of the Qwen snapshot are never built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import from_json, read_json

SAMPLE_RATE = 24000
THINKER_SAMPLE_RATE = 16000
"""The rate the thinker's audio tower hears (Whisper features)."""
NO_PROMPT_AUDIO_MARKER = "|<no_prompt_audio>|"
FLASH_T_GRID = (0.0, 0.07612049579620361, 0.2928932309150696, 0.6173166036605835, 1.0)
MAX_SECONDS = 30.0


@dataclass(frozen=True)
class TextConfig:
    """The thinker's decoder (Qwen2.5 with multimodal RoPE; audio and text share one position axis here)."""

    vocab_size: int = 151936
    hidden_size: int = 2048
    intermediate_size: int = 11008
    num_hidden_layers: int = 36
    num_attention_heads: int = 16
    num_key_value_heads: int = 2
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class AudioConfig:
    """The thinker's audio tower (Whisper-style encoder over windows of 2 x n_window mel frames)."""

    num_mel_bins: int = 128
    d_model: int = 1280
    encoder_layers: int = 32
    encoder_attention_heads: int = 20
    encoder_ffn_dim: int = 5120
    max_source_positions: int = 1500
    n_window: int = 100
    output_dim: int = 2048


@dataclass(frozen=True)
class DiTConfig:
    dim: int = 1536
    heads: int = 24
    dim_head: int = 64
    ff_mult: float = 2.0
    text_hidden_dim: int = 2048
    num_layers: int = 10
    num_single_layers: int = 20
    attn_mask_enabled: bool = True


@dataclass(frozen=True)
class VAEConfig:
    upsample_rates: tuple[int, ...] = (5, 4, 3, 2, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (10, 8, 6, 4, 4, 4)
    upsample_initial_channel: int = 1536
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    downsample_rates: tuple[int, ...] = (2, 2, 2, 3, 4, 5)
    downsample_channels: tuple[int, ...] = (12, 24, 48, 96, 192, 384, 768)
    latent_dim: int = 64
    use_vae: bool = True
    causal: bool = True
    act_causal: bool = True
    flow_hidden_channels: int = 256

    @property
    def hop(self) -> int:
        return math.prod(self.downsample_rates)


@dataclass(frozen=True)
class Defaults:
    nfe: int = 32
    cfg: float = 2.0
    sway: float | None = -1.0


@dataclass(frozen=True)
class AuKConfig:
    text: TextConfig
    audio: AudioConfig
    dit: DiTConfig
    vae: VAEConfig
    variant: str = "base"
    """"base" (32-step) or "flash" (DMD-distilled 4-step)."""
    flash_t_grid: tuple[float, ...] = FLASH_T_GRID
    defaults: Defaults = field(default_factory=Defaults)
    audio_token_id: int = 151646
    audio_start_token_id: int = 151647
    audio_end_token_id: int = 151648
    sample_rate: int = SAMPLE_RATE
    downsample_rate: int = 480

    @property
    def flash(self) -> bool:
        return self.variant == "flash"

    @property
    def frames_per_second(self) -> float:
        return self.sample_rate / self.downsample_rate

    def seconds_to_frames(self, seconds: float) -> int:
        return max(1, math.ceil(seconds * self.sample_rate / self.downsample_rate))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuKConfig:
        thinker = data.get("thinker_config", data)
        text = thinker.get("text_config", {})
        rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
        text = {**text, "rope_theta": rope.get("rope_theta", text.get("rope_theta", TextConfig.rope_theta))}
        vae = dict(data.get("vae") or {})
        defaults = dict(data.get("defaults") or {})
        return cls(
            text=from_json(TextConfig, text),
            audio=from_json(AudioConfig, thinker.get("audio_config")),
            dit=from_json(DiTConfig, data.get("dit")),
            vae=from_json(VAEConfig, vae.get("model_init_kwargs"), latent_dim=vae.get("latent_dim", VAEConfig.latent_dim)),
            variant=str(data.get("variant", "base")),
            flash_t_grid=tuple(float(t) for t in data.get("flash_t_grid", FLASH_T_GRID)),
            defaults=from_json(Defaults, defaults, where="defaults"),
            audio_token_id=int(thinker.get("audio_token_index", thinker.get("audio_token_id", 151646))),
            audio_start_token_id=int(thinker.get("audio_start_token_id", 151647)),
            audio_end_token_id=int(thinker.get("audio_end_token_id", 151648)),
            sample_rate=int(vae.get("target_sample_rate", SAMPLE_RATE)),
            downsample_rate=int(vae.get("downsample_rate", 480)),
        )

    @classmethod
    def from_dir(cls, path: Path) -> AuKConfig:
        return cls.from_dict(read_json(path))


def _interpolate(value: Any, root: dict[str, Any]) -> Any:
    """OmegaConf-style `${a.b}` references in the upstream config.yaml, resolved against its root (data only)."""
    if isinstance(value, dict):
        return {k: _interpolate(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, root) for v in value]
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        target: Any = root
        for part in value[2:-1].split("."):
            target = target[part]
        return _interpolate(target, root)
    return value


def upstream_dict(auk_dir: Path, qwen_config: dict[str, Any], variant: str) -> dict[str, Any]:
    """The assembled config.json's content from the upstream AuK config.yaml and the Qwen2.5-Omni-3B config.json."""
    import yaml

    raw = yaml.safe_load((auk_dir / "config.yaml").read_text()) or {}
    raw = _interpolate(raw, raw)
    model = raw.get("model") if isinstance(raw.get("model"), dict) else raw
    schedule = dict(model.get("schedule") or {})
    defaults = {"nfe": schedule.get("nfe", 32), "cfg": schedule.get("cfg", schedule.get("cfg_strength", 2.0)),
                "sway": schedule.get("sway", schedule.get("sway_sampling_coef", -1.0))}
    return {
        **qwen_config, "model_type": "auk", "dit": dict(model.get("arch") or {}), "vae": dict(model.get("vae") or {}),
        "variant": variant, "flash_t_grid": list(schedule.get("flash_t_grid", schedule.get("t_grid", FLASH_T_GRID))), "defaults": defaults,
    }
