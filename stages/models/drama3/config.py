"""Drama 3's `config.json` (`model_type: fish_omni`), read with its published field names and checked the way the
reference server checks it: a Qwen3.5-MoE backbone in `text_config` (`qwen3_5_moe_text`, or `fish_omni_text` with
the same fields plus fish-only flags whose values the backbone hard-codes), the codebook-MTP decoder in
`audio_decoder_config` (`fish_qwen3_audio_decoder`), the semantic band and the template/schema versions at the top.

Anything the server does not implement is refused by name rather than loaded wrongly: another
`speech_template_version`, another `fish_schema_version`, an audio encoder, extra samplable ids, a decoder that is
not `codebook_mtp_shared`, a scaled RoPE. `quantization_config` (`bsgemm-moe`: block-FP8 routed experts with
[128, 128] weight blocks) is read from the top level or `text_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from vocalis.stages.api.config_json import ConfigFile, from_json
from vocalis.stages.components.hybrid import FULL, HybridConfig
from vocalis.stages.models.fish_common.semantic_tokens import SemanticTokens

T = TypeVar("T")

MODEL_TYPE = "fish_omni"
TEXT_MODEL_TYPES = ("fish_omni_text", "qwen3_5_moe_text")
DECODER_MODEL_TYPE = "fish_qwen3_audio_decoder"
SPEECH_TEMPLATE_VERSION = "reference-bracket-v1"
FISH_SCHEMA_VERSION = 1
FP8_METHOD = "bsgemm-moe"
FP8_BLOCK = (128, 128)
VQ_PLACEMENTS = ("backbone_partial", "mtp_shared_pre")

# fish_omni_text flags whose value the backbone hard-codes: (name, value when absent, value required)
_FISH_TEXT_INVARIANTS = (
    ("rotary_interleaved", False, False),
    ("use_qk_norm", True, True),
    ("attn_output_gate", True, True),
    ("layernorm_zero_centered_gamma", False, True),
    ("shared_expert_gate", True, True),
)


class Drama3ConfigError(ValueError):
    """config.json asks for something this server does not build; the message names the field."""


@dataclass(frozen=True)
class CodebookDecoderConfig:
    """`audio_decoder_config`: the tower that predicts codes 1..num_codebooks-1 of each frame."""

    dim: int
    n_head: int
    n_local_heads: int
    head_dim: int
    n_layer: int
    """Shared enrichment layers (published: equal to `shared_enrichment_layers`)."""
    intermediate_size: int
    norm_eps: float
    num_codebooks: int
    vocab_size: int
    """Codes per codebook (the semantic band's size)."""
    shared_enrichment_layers: int
    rope_base: float
    rotary_percent: float
    vq_feature_placement: str
    vq_backbone_codebooks: int = 0
    """Codes 1..this ride on the backbone's input embedding of a semantic frame; the rest enter the first shared layer."""

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.rotary_percent)

    @property
    def num_layers(self) -> int:
        """Shared layers plus one per predicted codebook (4 + 9 = 13 published)."""
        return self.shared_enrichment_layers + self.num_codebooks - 1


@dataclass(frozen=True)
class Drama3Config(SemanticTokens, ConfigFile):
    MODEL_TYPE = MODEL_TYPE
    text: HybridConfig
    decoder: CodebookDecoderConfig
    eos_token_id: int
    fp8_experts: bool = False
    """The routed experts are stored block-FP8 (`quantization_config.quant_method` bsgemm-moe)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Drama3Config:
        if data.get("fish_schema_version", FISH_SCHEMA_VERSION) != FISH_SCHEMA_VERSION:
            raise Drama3ConfigError(f"fish_schema_version {data.get('fish_schema_version')!r} is not supported ({FISH_SCHEMA_VERSION} is)")
        version = data.get("speech_template_version")
        if version != SPEECH_TEMPLATE_VERSION:
            raise Drama3ConfigError(f"speech_template_version {version!r} is not supported: this server builds "
                                    f"{SPEECH_TEMPLATE_VERSION!r} prompts only")
        if data.get("audio_encoder_config") is not None:
            raise Drama3ConfigError("audio_encoder_config is not supported")
        if data.get("extra_samplable_token_ids"):
            raise Drama3ConfigError("extra_samplable_token_ids is not supported")
        if not isinstance(data.get("text_config"), Mapping) or not isinstance(data.get("audio_decoder_config"), Mapping):
            raise Drama3ConfigError("config.json needs text_config and audio_decoder_config objects")
        text = parse_text_config(data["text_config"])
        decoder = parse_decoder_config(data["audio_decoder_config"], text.hidden_size)
        eos = data.get("eos_token_id", data["text_config"].get("eos_token_id"))
        if isinstance(eos, list):
            eos = eos[0] if len(eos) == 1 else None
        if isinstance(eos, bool) or not isinstance(eos, int) or eos < 0:
            raise Drama3ConfigError(f"config.json needs one integer eos_token_id; got {eos!r}")
        config = _read(cls, data, "config", {"semantic_start_token_id": 0, "semantic_end_token_id": 0, "eos_token_id": 0}, text=text, decoder=decoder,
                       eos_token_id=eos, fp8_experts=_fp8(data))
        start, end = config.semantic_start_token_id, config.semantic_end_token_id
        if end < start:
            raise Drama3ConfigError(f"config.semantic_end_token_id {end} is below semantic_start_token_id {start}")
        if end >= text.vocab_size or eos >= text.vocab_size:
            raise Drama3ConfigError(f"semantic_end_token_id {end} / eos_token_id {eos} outside the text vocabulary of {text.vocab_size}")
        if end - start + 1 != decoder.vocab_size:
            raise Drama3ConfigError(f"the semantic band [{start}, {end}] does not match audio_decoder_config.vocab_size {decoder.vocab_size}")
        if start <= eos <= end:
            raise Drama3ConfigError(f"eos_token_id {eos} is inside the semantic band")
        return config


def _read(cls: type[T], data: Mapping[str, Any], where: str, minimum: Mapping[str, int] | None = None, **sections: Any) -> T:
    """`from_json`, strict: every sized field present, of its type and positive (or at least `minimum[name]`)."""
    try:
        config = from_json(cls, data, where=where, **sections)
    except ValueError as error:
        raise Drama3ConfigError(str(error)) from None
    for f in fields(cls):  # type: ignore[arg-type]
        value, least = getattr(config, f.name), (minimum or {}).get(f.name, 1)
        if f.type in ("int", "float") and not (value >= least if f.type == "int" else value > 0):
            raise Drama3ConfigError(f"{where}.{f.name} must be {f'>= {least}' if f.type == 'int' else 'positive'}; got {value!r}")
    return config


def parse_text_config(text: Mapping[str, Any]) -> HybridConfig:
    kind = text.get("model_type")
    if kind not in TEXT_MODEL_TYPES:
        raise Drama3ConfigError(f"text_config.model_type is {kind!r}; Drama 3 has one of {list(TEXT_MODEL_TYPES)}")
    if kind == "fish_omni_text":
        for name, absent, required in _FISH_TEXT_INVARIANTS:
            if text.get(name, absent) is not required:
                raise Drama3ConfigError(f"text_config.{name} must be {required} (the backbone hard-codes it); got {text.get(name)!r}")
    rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise Drama3ConfigError(f"text_config.rope_parameters {dict(rope)!r}: only the default RoPE is implemented")
    config = HybridConfig.from_dict(text)
    moe = ["moe"] * config.num_hidden_layers
    if kind == "fish_omni_text" and text.get("mlp_layer_types", moe) != moe:
        raise Drama3ConfigError("text_config.mlp_layer_types must be 'moe' for every layer (the Qwen3.5-MoE backbone)")
    if not config.num_experts or not config.num_experts_per_tok or config.num_experts_per_tok > config.num_experts:
        raise Drama3ConfigError("text_config needs num_experts and num_experts_per_tok (<= num_experts): Drama 3's backbone is a MoE")
    if FULL not in config.layer_types:
        raise Drama3ConfigError("text_config.layer_types has no full_attention layer")
    if config.tie_word_embeddings:
        raise Drama3ConfigError("text_config.tie_word_embeddings is true; Drama 3 keeps a separate lm_head")
    return config


def parse_decoder_config(data: Mapping[str, Any], text_hidden: int) -> CodebookDecoderConfig:
    where = "audio_decoder_config"
    if data.get("model_type", DECODER_MODEL_TYPE) != DECODER_MODEL_TYPE:
        raise Drama3ConfigError(f"{where}.model_type is {data.get('model_type')!r}, not {DECODER_MODEL_TYPE!r}")
    if data.get("decoder_type") != "codebook_mtp_shared":
        raise Drama3ConfigError(f"{where}.decoder_type {data.get('decoder_type')!r} is not supported (codebook_mtp_shared is)")
    if data.get("vq_feature_scope", "all_vq") != "all_vq":
        raise Drama3ConfigError(f"{where}.vq_feature_scope {data.get('vq_feature_scope')!r} is not supported (all_vq is)")
    placement = data.get("vq_feature_placement")
    if placement not in VQ_PLACEMENTS:
        raise Drama3ConfigError(f"{where}.vq_feature_placement {placement!r} is not supported ({list(VQ_PLACEMENTS)} are)")
    for name in ("attention_output_gate", "layernorm_zero_centered_gamma"):
        if data.get(name) is not True:
            raise Drama3ConfigError(f"{where}.{name} must be true (the tower is built with it)")
    spec = data.get("mtp_spec") or {}
    if (data.get("use_moe") or data.get("mtp_use_swa") or data.get("attention_qkv_bias") or data.get("attention_o_bias")
            or data.get("window_size") is not None or data.get("dropout", 0.0)
            or spec.get("attention_variant", "full_attention") != "full_attention"):
        raise Drama3ConfigError(f"{where}: MoE, sliding windows, attention biases and dropout are not part of the tower")
    config = _read(CodebookDecoderConfig, data, where, {"num_codebooks": 2, "vq_backbone_codebooks": 0})
    if config.n_layer != config.shared_enrichment_layers:
        raise Drama3ConfigError(f"{where}.n_layer {config.n_layer} differs from shared_enrichment_layers {config.shared_enrichment_layers}")
    if data.get("max_seq_len", config.num_codebooks + 1) != config.num_codebooks + 1:
        raise Drama3ConfigError(f"{where}.max_seq_len must be num_codebooks + 1 = {config.num_codebooks + 1}")
    if config.dim != data.get("text_dim", config.dim) or config.dim != text_hidden:
        raise Drama3ConfigError(f"{where}.dim {config.dim} must equal text_dim and text_config.hidden_size {text_hidden}")
    if config.n_head % config.n_local_heads:
        raise Drama3ConfigError(f"{where}.n_head {config.n_head} is not a multiple of n_local_heads {config.n_local_heads}")
    if config.rotary_percent > 1 or config.rotary_dim == 0 or config.rotary_dim % 2:
        raise Drama3ConfigError(f"{where}: head_dim * rotary_percent must be a positive even width; got {config.rotary_dim}")
    if placement == "backbone_partial" and not 1 <= config.vq_backbone_codebooks <= config.num_codebooks - 1:
        raise Drama3ConfigError(f"{where}: backbone_partial needs 1 <= vq_backbone_codebooks <= {config.num_codebooks - 1}")
    if placement == "mtp_shared_pre" and config.vq_backbone_codebooks:
        raise Drama3ConfigError(f"{where}: mtp_shared_pre needs vq_backbone_codebooks = 0")
    return config


def _fp8(data: Mapping[str, Any]) -> bool:
    quant = data.get("quantization_config") or data.get("text_config", {}).get("quantization_config")
    if not quant:
        return False
    if quant.get("quant_method") != FP8_METHOD:
        raise Drama3ConfigError(f"quantization_config.quant_method {quant.get('quant_method')!r} is not supported ({FP8_METHOD!r} is)")
    if tuple(quant.get("weight_block_size") or ()) != FP8_BLOCK:
        raise Drama3ConfigError(f"quantization_config.weight_block_size must be {list(FP8_BLOCK)}; got {quant.get('weight_block_size')!r}")
    return True
