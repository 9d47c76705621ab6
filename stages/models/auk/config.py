"""AuK's configuration, read from the assembled checkpoint's config.json (published field names).

The assembled bundle (vLLM-Omni's `prepare_auk_checkpoint.py`) is the Qwen2.5-Omni-3B config extended with
`model_type: auk`, `dit`, `vae`, `variant`, `flash_t_grid` and `defaults`. Only the thinker's text model and audio
tower are used: the talker and token2wav parts of the Qwen snapshot are never built.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import ConfigFile, from_json
from vocalis.stages.api.decoder_sizes import DecoderSizes
from vocalis.stages.api.whisper_sizes import WhisperEncoderSizes

SAMPLE_RATE = 24000
THINKER_SAMPLE_RATE = 16000
"""The rate the thinker's audio tower hears (Whisper features)."""
NO_PROMPT_AUDIO_MARKER = "|<no_prompt_audio>|"
FLASH_T_GRID = (0.0, 0.07612049579620361, 0.2928932309150696, 0.6173166036605835, 1.0)
MAX_SECONDS = 30.0
UPSTREAM_DEFAULTS = Path(__file__).with_name("upstream_defaults.json")
"""The DiT's and VAE's sizes where the bundle's `dit` / `vae.model_init_kwargs` leave a key out: the defaults of the
upstream classes (the published AuK's sizes), in the assembled config.json's own layout."""


@dataclass(frozen=True)
class TextConfig(DecoderSizes):
    """The thinker's decoder (Qwen2.5 with multimodal RoPE; audio and text share one position axis here)."""

    rms_norm_eps: float
    rope_theta: float


@dataclass(frozen=True)
class AudioConfig(WhisperEncoderSizes):
    """The thinker's audio tower (Whisper-style encoder over windows of 2 x n_window mel frames)."""

    n_window: int
    output_dim: int


@dataclass(frozen=True)
class DiTConfig:
    dim: int
    heads: int
    dim_head: int
    ff_mult: float
    text_hidden_dim: int
    num_layers: int
    num_single_layers: int
    attn_mask_enabled: bool


@dataclass(frozen=True)
class VAEConfig:
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    downsample_rates: tuple[int, ...]
    downsample_channels: tuple[int, ...]
    latent_dim: int
    use_vae: bool
    causal: bool
    act_causal: bool
    flow_hidden_channels: int

    @property
    def hop(self) -> int:
        return math.prod(self.downsample_rates)


@dataclass(frozen=True)
class Defaults:
    nfe: int = 32
    cfg: float = 2.0
    sway: float | None = -1.0


@dataclass(frozen=True)
class AuKConfig(ConfigFile):
    text: TextConfig
    audio: AudioConfig
    dit: DiTConfig
    vae: VAEConfig
    variant: str
    """"base" (32-step) or "flash" (DMD-distilled 4-step)."""
    flash_t_grid: tuple[float, ...]
    defaults: Defaults
    audio_token_id: int
    audio_start_token_id: int
    audio_end_token_id: int
    sample_rate: int
    downsample_rate: int

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
        text = {**text, "rope_theta": rope["rope_theta"]} if "rope_theta" in rope else text
        upstream = json.loads(UPSTREAM_DEFAULTS.read_text())
        vae = upstream["vae"] | dict(data.get("vae") or {})
        defaults = dict(data.get("defaults") or {})
        return cls(
            text=TextConfig.read(text, "thinker_config.text_config"),
            audio=from_json(AudioConfig, thinker.get("audio_config"), where="thinker_config.audio_config"),
            dit=from_json(DiTConfig, upstream["dit"] | dict(data.get("dit") or {}), where="dit"),
            vae=from_json(VAEConfig, upstream["vae"]["model_init_kwargs"] | dict(vae.get("model_init_kwargs") or {}),
                          where="vae.model_init_kwargs", latent_dim=vae["latent_dim"]),
            variant=str(data.get("variant", "base")),
            flash_t_grid=tuple(float(t) for t in data.get("flash_t_grid", FLASH_T_GRID)),
            defaults=from_json(Defaults, defaults, where="defaults"),
            audio_token_id=int(thinker.get("audio_token_index", thinker.get("audio_token_id", 151646))),
            audio_start_token_id=int(thinker.get("audio_start_token_id", 151647)),
            audio_end_token_id=int(thinker.get("audio_end_token_id", 151648)),
            sample_rate=int(vae.get("target_sample_rate", SAMPLE_RATE)),
            downsample_rate=int(vae.get("downsample_rate", 480)),
        )


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
