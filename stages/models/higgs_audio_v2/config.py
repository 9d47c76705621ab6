"""higgs-audio v2's configuration, read from the checkpoint's own config.json in either published vocabulary.

- transformers-native (model_type "higgs_audio_v2", `HiggsAudioV2Config`): Llama fields at the top level,
  `num_codebooks`, `codebook_size` (codes plus the stream BOS/EOS), the audio token ids.
- Boson's original (model_type "higgs_audio"): the Llama backbone under `text_config`, `audio_num_codebooks`,
  `audio_codebook_size` (codes only: its embedding table and head hold two more per codebook), the DualFFN layer list.

Both are read into one `HiggsAudioV2Config`. Token ids come from the config where it has them and from the tokenizer
otherwise (`tokenizer.py`); none is hard-coded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocalis.stages.api.decoder_sizes import DecoderSizes
from vocalis.stages.models.higgs_audio_v2.family import BOSON_MODEL_TYPE, NATIVE_MODEL_TYPE


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3 frequency scaling (`rope_type` "llama3"); None in `HiggsAudioV2Config.rope_scaling` means plain RoPE."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True)
class HiggsAudioV2Config(DecoderSizes):
    layout: str
    """NATIVE_MODEL_TYPE or BOSON_MODEL_TYPE: which tensor vocabulary the checkpoint uses."""
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: RopeScaling | None
    attention_bias: bool
    mlp_bias: bool
    num_codebooks: int
    codebook_size: int
    """Entries per codebook in the audio embedding and head: the codes plus the stream BOS and EOS."""
    audio_stream_bos_id: int
    audio_stream_eos_id: int
    audio_token_id: int | None
    """`<|AUDIO_OUT|>` where the config names it (None: from the tokenizer)."""
    audio_bos_token_id: int | None
    """`<|audio_out_bos|>` where the config names it."""
    audio_embed_avg: bool = False
    """Boson's option to average, rather than sum, the codebooks' embeddings of a frame."""

    @property
    def num_codes(self) -> int:
        """Codes per codebook that the codec decodes (the stream BOS/EOS ids are not codes)."""
        return min(self.audio_stream_bos_id, self.audio_stream_eos_id)

    @classmethod
    def from_dir(cls, path: Path) -> HiggsAudioV2Config:
        data = json.loads((path / "config.json").read_text())
        kind = data.get("model_type")
        if kind == NATIVE_MODEL_TYPE:
            config = cls._native(data)
        elif kind == BOSON_MODEL_TYPE:
            config = cls._boson(data)
        else:
            raise ValueError(f"{path}/config.json: model_type is {kind!r}, not {NATIVE_MODEL_TYPE!r} or {BOSON_MODEL_TYPE!r}")
        for name in ("audio_stream_bos_id", "audio_stream_eos_id"):
            if not 0 <= getattr(config, name) < config.codebook_size:
                raise ValueError(f"{path}/config.json: {name} {getattr(config, name)} is outside the {config.codebook_size} audio ids")
        return config

    @classmethod
    def _native(cls, data: dict[str, Any]) -> HiggsAudioV2Config:
        rope = data.get("rope_parameters") or {}
        theta = rope.get("rope_theta", data.get("rope_theta", 500000.0))
        scaling = rope if rope.get("rope_type") else data.get("rope_scaling")
        return cls(
            layout=NATIVE_MODEL_TYPE,
            **_llama(data, theta, scaling),
            num_codebooks=data.get("num_codebooks", 8),
            codebook_size=data.get("codebook_size", 1024),
            audio_stream_bos_id=data.get("audio_stream_bos_id", 1024),
            audio_stream_eos_id=data.get("audio_stream_eos_id", 1025),
            audio_token_id=data.get("audio_token_id"),
            audio_bos_token_id=data.get("audio_bos_token_id"),
        )

    @classmethod
    def _boson(cls, data: dict[str, Any]) -> HiggsAudioV2Config:
        text = data.get("text_config") or {}
        layers = text.get("num_hidden_layers", 28)
        adapter = data.get("audio_adapter_type", "dual_ffn")
        if adapter not in ("dual_ffn", "dual_ffn_fast_forward"):
            raise ValueError(f"config.json: audio_adapter_type {adapter!r} is not supported (only the DualFFN audio expert)")
        dual = data.get("audio_dual_ffn_layers")
        if dual is not None and sorted(dual) != list(range(layers)):
            raise ValueError(
                f"config.json: audio_dual_ffn_layers {dual} must list every one of the {layers} layers "
                "(the audio expert on a subset of layers is not supported)"
            )
        for flag in ("use_audio_out_self_attention", "use_audio_out_embed_projector"):
            if data.get(flag):
                raise ValueError(f"config.json: {flag} is not supported")
        if not data.get("use_delay_pattern", True):
            raise ValueError("config.json: use_delay_pattern false is not supported (higgs-audio v2 generates with the delay pattern)")
        ffn_hidden = data.get("audio_ffn_hidden_size")
        ffn_inner = data.get("audio_ffn_intermediate_size")
        hidden, inner = text.get("hidden_size", 3072), text.get("intermediate_size", 8192)
        if (ffn_hidden not in (None, hidden)) or (ffn_inner not in (None, inner)):
            raise ValueError("config.json: an audio FFN of another size than the text FFN is not supported")
        codes = data.get("audio_codebook_size", 1024)
        return cls(
            layout=BOSON_MODEL_TYPE,
            **_llama(text, text.get("rope_theta", 500000.0), text.get("rope_scaling")),
            num_codebooks=data.get("audio_num_codebooks", 8),
            codebook_size=codes + 2,
            audio_stream_bos_id=data.get("audio_stream_bos_id", codes),
            audio_stream_eos_id=data.get("audio_stream_eos_id", codes + 1),
            audio_token_id=data.get("audio_out_token_idx"),
            audio_bos_token_id=data.get("audio_out_bos_token_id"),
            audio_embed_avg=bool(data.get("audio_embed_avg", False)),
        )


def _llama(data: dict[str, Any], theta: float, scaling: dict[str, Any] | None) -> dict[str, Any]:
    hidden = data.get("hidden_size", 3072)
    heads = data.get("num_attention_heads", 24)
    if data.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json: hidden_act {data['hidden_act']!r} is not supported (Llama uses silu)")
    rope_scaling = None
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind == "llama3":
            rope_scaling = RopeScaling(
                float(scaling["factor"]), float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"]),
                int(scaling["original_max_position_embeddings"]),
            )
        elif kind not in (None, "default"):
            raise ValueError(f"config.json: rope_type {kind!r} is not supported (default or llama3)")
    return {
        "vocab_size": data.get("vocab_size", 128256),
        "hidden_size": hidden,
        "intermediate_size": data.get("intermediate_size", 8192),
        "num_hidden_layers": data.get("num_hidden_layers", 28),
        "num_attention_heads": heads,
        "num_key_value_heads": data.get("num_key_value_heads") or heads,
        "head_dim": data.get("head_dim") or hidden // heads,
        "rms_norm_eps": data.get("rms_norm_eps", 1e-5),
        "rope_theta": float(theta),
        "rope_scaling": rope_scaling,
        "attention_bias": bool(data.get("attention_bias", False)),
        "mlp_bias": bool(data.get("mlp_bias", False)),
    }
