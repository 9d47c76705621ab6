"""Configuration of a VoxCPM2 checkpoint, read from its config.json as the publisher writes it.

config.json has `architecture: "voxcpm2"` and nested sections: `lm_config` (the MiniCPM4 base LM),
`encoder_config` (LocEnc), `dit_config` with `cfm_config` (LocDiT flow matching), `audio_vae_config`
(AudioVAE v2). The residual LM, LocEnc and LocDiT are copies of `lm_config` with a few sizes replaced,
exactly as the reference builds them; `TransformerConfig` is that resolved view. Defaults are the
reference's for keys a config leaves out; unknown keys are ignored, as the reference ignores them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from vocalis.stages.api.config_json import ConfigFile, from_json
from vocalis.stages.api.decoder_sizes import DecoderSizes

ARCHITECTURE = "voxcpm2"


@dataclass(frozen=True)
class RopeScaling:
    """MiniCPM's LongRoPE: per-frequency divisors, the long ones once positions may exceed the original range."""

    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_position_embeddings: int
    type: str = "longrope"


@dataclass(frozen=True)
class TransformerConfig:
    """One MiniCPM4 decoder stack (base LM, residual LM, LocEnc or LocDiT)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    vocab_size: int
    """0: no token embedding (everything but the base LM)."""
    use_mup: bool
    scale_emb: float
    scale_depth: float
    rope_theta: float
    max_position_embeddings: int
    rope_scaling: RopeScaling | None
    no_rope: bool = False

    @property
    def residual_scale(self) -> float:
        """Branch scale of each residual add (muP: scale_depth / sqrt(layers); else 1)."""
        return self.scale_depth / math.sqrt(self.num_layers) if self.use_mup else 1.0

    @property
    def embedding_scale(self) -> float:
        return self.scale_emb if self.use_mup else 1.0


@dataclass(frozen=True)
class LMConfig(DecoderSizes):
    """`lm_config`: the MiniCPM4 text-semantic LM, and the template of every other stack. Its `head_dim` is published
    as `kv_channels` (None or absent: hidden_size / num_attention_heads)."""

    max_position_embeddings: int
    rms_norm_eps: float
    rope_scaling: RopeScaling
    scale_emb: float
    dim_model_base: int
    scale_depth: float
    rope_theta: float
    bos_token_id: int = 1
    eos_token_id: int = 2
    use_mup: bool = True
    no_rope: bool = False

    def stack(self, **changes: Any) -> TransformerConfig:
        """This config as a decoder stack, with the sizes a sub-model replaces."""
        base = TransformerConfig(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_layers=self.num_hidden_layers,
            num_heads=self.num_attention_heads,
            num_kv_heads=self.num_key_value_heads,
            head_dim=0,
            rms_norm_eps=self.rms_norm_eps,
            vocab_size=self.vocab_size,
            use_mup=self.use_mup,
            scale_emb=self.scale_emb,
            scale_depth=self.scale_depth,
            rope_theta=self.rope_theta,
            max_position_embeddings=self.max_position_embeddings,
            rope_scaling=self.rope_scaling,
            no_rope=self.no_rope,
        )
        kv_channels = changes.pop("kv_channels", self.head_dim)
        stack = replace(base, **changes)
        head_dim = kv_channels if kv_channels else stack.hidden_size // stack.num_heads
        return replace(stack, head_dim=head_dim)


@dataclass(frozen=True)
class LocalStackConfig:
    """`encoder_config` (LocEnc) or `dit_config` (LocDiT): sizes that replace the LM's."""

    hidden_dim: int = 1024
    ffn_dim: int = 4096
    num_heads: int = 16
    num_layers: int = 4
    kv_channels: int | None = None


@dataclass(frozen=True)
class CfmConfig:
    """`dit_config.cfm_config`. Inference reads none of it (the solver is Euler, the guidance comes per request)."""

    sigma_min: float = 1e-6
    solver: str = "euler"
    t_scheduler: str = "log-norm"
    inference_cfg_rate: float = 1.0


@dataclass(frozen=True)
class AudioVAEConfig:
    """`audio_vae_config`: AudioVAE v2, encoding 16 kHz audio to latents and decoding them at 48 kHz."""

    encoder_dim: int = 128
    encoder_rates: tuple[int, ...] = (2, 5, 8, 8)
    latent_dim: int = 64
    decoder_dim: int = 2048
    decoder_rates: tuple[int, ...] = (8, 6, 5, 2, 2, 2)
    depthwise: bool = True
    sample_rate: int = 16000
    """Rate of the audio the encoder takes (references are resampled to it)."""
    out_sample_rate: int = 48000
    """Rate of the audio the decoder produces."""
    use_noise_block: bool = False
    sr_bin_boundaries: tuple[int, ...] | None = (20000, 30000, 40000)
    """Buckets of the decoder's output-rate condition; None: no condition."""
    cond_type: str = "scale_bias"
    cond_dim: int = 128
    cond_out_layer: bool = False

    @property
    def encoder_hop(self) -> int:
        """Input samples per latent frame."""
        return math.prod(self.encoder_rates)

    @property
    def decoder_hop(self) -> int:
        """Output samples per latent frame."""
        return math.prod(self.decoder_rates)


@dataclass(frozen=True)
class VoxCPM2Config(ConfigFile):
    lm: LMConfig
    encoder: LocalStackConfig = field(default_factory=LocalStackConfig)
    dit: LocalStackConfig = field(default_factory=LocalStackConfig)
    cfm: CfmConfig = field(default_factory=CfmConfig)
    audio_vae: AudioVAEConfig = field(default_factory=AudioVAEConfig)
    patch_size: int = 4
    """Latent frames per generated step (one LM position)."""
    feat_dim: int = 64
    residual_lm_num_layers: int = 8
    residual_lm_no_rope: bool = False
    scalar_quantization_latent_dim: int = 512
    scalar_quantization_scale: int = 9
    dit_mean_mode: bool = False
    max_length: int = 8192
    """Positions (prompt + generated) of one sequence, as the reference sizes its KV cache."""
    dtype: str = "bfloat16"

    # -- the stacks, resolved as the reference builds them --------------------------------------

    @property
    def base_lm(self) -> TransformerConfig:
        return self.lm.stack()

    @property
    def residual_lm(self) -> TransformerConfig:
        return self.lm.stack(num_layers=self.residual_lm_num_layers, vocab_size=0, no_rope=self.residual_lm_no_rope)

    @property
    def local_encoder(self) -> TransformerConfig:
        return self._local(self.encoder)

    @property
    def local_dit(self) -> TransformerConfig:
        return self._local(self.dit)

    def _local(self, local: LocalStackConfig) -> TransformerConfig:
        return self.lm.stack(
            hidden_size=local.hidden_dim, intermediate_size=local.ffn_dim, num_heads=local.num_heads,
            num_layers=local.num_layers, kv_channels=local.kv_channels, vocab_size=0,
        )

    @property
    def samples_per_patch(self) -> int:
        return self.patch_size * self.audio_vae.decoder_hop

    # -- reading ----------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VoxCPM2Config:
        architecture = str(data.get("architecture", ARCHITECTURE)).lower()
        if architecture != ARCHITECTURE:
            raise ValueError(f"architecture is {architecture!r}, not {ARCHITECTURE!r}")
        lm = data["lm_config"]
        rope_scaling = from_json(RopeScaling, lm["rope_scaling"])
        dit = dict(data.get("dit_config") or {})
        cfm = dit.pop("cfm_config", None) or {}
        mean_mode = bool(dit.pop("dit_mean_mode", False))  # the reference reads only this spelling, not `mean_mode`
        vae = data.get("audio_vae_config")
        top = {k: data[k] for k in (
            "patch_size", "feat_dim", "residual_lm_num_layers", "residual_lm_no_rope", "scalar_quantization_latent_dim",
            "scalar_quantization_scale", "max_length", "dtype",
        ) if k in data}
        config = cls(
            lm=LMConfig.read(lm, "lm_config", aliases={"kv_channels": "head_dim"}, rope_scaling=rope_scaling),
            encoder=from_json(LocalStackConfig, data.get("encoder_config") or {}),
            dit=from_json(LocalStackConfig, dit),
            cfm=from_json(CfmConfig, cfm),
            audio_vae=from_json(AudioVAEConfig, vae or {}),
            dit_mean_mode=mean_mode,
            **top,
        )
        config.validate()
        return config

    def validate(self) -> None:
        if self.feat_dim != self.audio_vae.latent_dim:
            raise ValueError(f"feat_dim ({self.feat_dim}) must equal audio_vae_config.latent_dim ({self.audio_vae.latent_dim})")
        base, residual = self.base_lm, self.residual_lm
        if (base.num_kv_heads, base.head_dim) != (residual.num_kv_heads, residual.head_dim):
            raise ValueError("the base and residual LMs must share KV heads and head size (one KV cache holds both)")
        if self.audio_vae.use_noise_block:
            raise ValueError("audio_vae_config.use_noise_block is not supported (it draws unseeded noise at decode time)")
        if self.audio_vae.cond_type not in ("scale_bias", "scale_bias_init", "add", "concat"):
            raise ValueError(f"unknown audio_vae_config.cond_type {self.audio_vae.cond_type!r}")
        if self.audio_vae.decoder_dim < 2 ** len(self.audio_vae.decoder_rates):
            raise ValueError("audio_vae_config.decoder_dim must be at least 2 ** len(decoder_rates)")

