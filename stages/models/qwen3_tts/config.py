"""Qwen3-TTS configuration, read from a checkpoint's config.json and speech_tokenizer/config.json.

Field names follow the JSON keys of the published checkpoints; every special id (text and codec)
comes from here, none is written in code. Unknown keys are ignored, missing ones take the defaults
of the reference configuration classes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from vocalis.stages.api.config_json import ConfigFile, from_json, read_json
from vocalis.stages.api.decoder_sizes import DecoderSizes, TransformerSizes

MODEL_TYPE = "qwen3_tts"
TASKS = ("custom_voice", "voice_design", "base")
"""Values of `tts_model_type`: the checkpoint kinds."""


@dataclass(frozen=True)
class CodePredictorConfig(DecoderSizes):
    """The small decoder that predicts codebooks 1..G-1 of a frame from the talker's hidden state."""

    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    attention_bias: bool = False
    num_code_groups: int = 32


@dataclass(frozen=True)
class TalkerConfig(DecoderSizes):
    """The Qwen3 decoder over text and codec embeddings that predicts codebook 0 of each frame. Its `vocab_size` is
    the codec vocabulary: the codebook plus 1024 control ids (pad, bos, eos, think, languages, speakers)."""

    code_predictor: CodePredictorConfig
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    attention_bias: bool = False
    max_position_embeddings: int = 32768
    num_code_groups: int = 32
    text_hidden_size: int = 2048
    text_vocab_size: int = 151936
    codec_eos_token_id: int = 4198
    codec_think_id: int = 4202
    codec_nothink_id: int = 4203
    codec_think_bos_id: int = 4204
    codec_think_eos_id: int = 4205
    codec_pad_id: int = 4196
    codec_bos_id: int = 4197
    codec_language_id: dict[str, int] = field(default_factory=dict)
    spk_id: dict[str, Any] = field(default_factory=dict)
    """Preset speaker -> codec id (an int, or a one-element list in some files)."""
    spk_is_dialect: dict[str, Any] = field(default_factory=dict)
    """Preset speaker -> the dialect language it speaks Chinese in, or false."""

    @property
    def mrope_section(self) -> list[int]:
        """Rotary sections (temporal, height, width) of half the head dim; text uses one position for all."""
        scaling = self.rope_scaling or {}
        return list(scaling.get("mrope_section") or [self.head_dim // 2])

    @property
    def mrope_interleaved(self) -> bool:
        return bool((self.rope_scaling or {}).get("interleaved", False))

    @property
    def num_control_ids(self) -> int:
        """The top ids of the codec vocabulary that are control tokens, never sampled (except EOS)."""
        return 1024

    def speaker_codec_id(self, name: str) -> int:
        value = self.spk_id[name]
        return int(value[0] if isinstance(value, (list, tuple)) else value)


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    """ECAPA-TDNN x-vector extractor (Base checkpoints only)."""

    mel_dim: int = 128
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    enc_kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    enc_dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    sample_rate: int = 24000


@dataclass(frozen=True)
class DecoderConfig(TransformerSizes):
    """The 12 Hz speech-tokenizer decoder: split RVQ, causal transformer, upsampling, SnakeBeta blocks. The sizes have
    no default (every published config names them); the four settings after them default as the reference class's."""

    codebook_size: int
    latent_dim: int
    codebook_dim: int
    sliding_window: int
    num_quantizers: int
    upsample_rates: tuple[int, ...]
    upsampling_ratios: tuple[int, ...]
    decoder_dim: int
    max_position_embeddings: int = 8000
    rope_theta: float = 10000.0
    attention_bias: bool = False
    rms_norm_eps: float = 1e-5

    @property
    def samples_per_frame(self) -> int:
        total = 1
        for rate in (*self.upsample_rates, *self.upsampling_ratios):
            total *= rate
        return total

    @property
    def conv_stack_frames(self) -> int:
        """Frames of the transformer's output that the convolutions after it read back (rounded up): the kernel-7
        ConvNeXt convolution after each upsampling, the decoder's kernel-7 convolutions, each block's transposed
        convolution (one input sample of overlap) and its residual units (kernel 7, dilations 1, 3 and 9)."""
        back, rate = Fraction(0), 1
        for ratio in self.upsampling_ratios:
            rate *= ratio
            back += Fraction(6, rate)
        back += Fraction(6, rate)
        for block_rate in self.upsample_rates:
            back += Fraction(1, rate)
            rate *= block_rate
            back += Fraction(6 * (1 + 3 + 9), rate)
        return math.ceil(back + Fraction(6, rate))


@dataclass(frozen=True)
class MimiEncoderConfig(TransformerSizes):
    """The Mimi encoder (SEANet + transformer + split RVQ) that turns reference audio into codes. The sizes have no
    default (every published config names them); the settings after them default as the reference class's."""

    sampling_rate: int
    frame_rate: float
    audio_channels: int
    num_filters: int
    num_residual_layers: int
    upsampling_ratios: tuple[int, ...]
    kernel_size: int
    last_kernel_size: int
    residual_kernel_size: int
    compress: int
    codebook_size: int
    codebook_dim: int
    num_quantizers: int
    vector_quantization_hidden_dimension: int
    num_semantic_quantizers: int
    dilation_growth_rate: int = 2
    use_causal_conv: bool = True
    pad_mode: str = "constant"
    use_conv_shortcut: bool = False
    hidden_act: str = "gelu"
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    attention_bias: bool = False

    @property
    def encodec_frame_rate(self) -> float:
        hop = 1
        for ratio in self.upsampling_ratios:
            hop *= ratio
        return self.sampling_rate / hop


@dataclass(frozen=True)
class SpeechTokenizerConfig(ConfigFile):
    decoder: DecoderConfig
    encoder: MimiEncoderConfig | None
    encoder_valid_num_quantizers: int
    input_sample_rate: int = 24000
    output_sample_rate: int = 24000
    decode_upsample_rate: int = 1920
    encode_downsample_rate: int = 1920

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpeechTokenizerConfig:
        encoder = data.get("encoder_config")
        return from_json(
            cls, data, where="speech_tokenizer/config.json",
            decoder=DecoderConfig.read(data.get("decoder_config"), "decoder_config"),
            encoder=MimiEncoderConfig.read(encoder, "encoder_config") if encoder else None,
        )


@dataclass(frozen=True)
class GenerationDefaults:
    """generation_config.json: the sampling a request gets unless it says otherwise."""

    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_temperature: float = 0.9
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    max_new_tokens: int = 2048


@dataclass(frozen=True)
class Qwen3TTSConfig:
    talker: TalkerConfig
    speaker_encoder: SpeakerEncoderConfig | None
    """Present for Base checkpoints only."""
    speech_tokenizer: SpeechTokenizerConfig
    generation: GenerationDefaults
    tts_model_type: str = "custom_voice"
    tts_model_size: str = ""
    tokenizer_type: str = "qwen3_tts_tokenizer_12hz"
    im_start_token_id: int = 151644
    im_end_token_id: int = 151645
    tts_pad_token_id: int = 151671
    tts_bos_token_id: int = 151672
    tts_eos_token_id: int = 151673
    transformers_version: str | None = None
    """Of the tool that wrote config.json; the reference tokenizer's behaviour depends on it (tokenizer.py)."""

    @classmethod
    def from_dir(cls, path: Path) -> Qwen3TTSConfig:
        data = read_json(path, MODEL_TYPE)
        generation_path = path / "generation_config.json"
        generation = json.loads(generation_path.read_text()) if generation_path.is_file() else {}
        try:
            return cls.from_dict(data, SpeechTokenizerConfig.from_dir(path / "speech_tokenizer"), generation)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    @classmethod
    def from_dict(cls, data: dict[str, Any], speech_tokenizer: SpeechTokenizerConfig, generation: dict[str, Any] | None = None) -> Qwen3TTSConfig:
        if data.get("tokenizer_type", "qwen3_tts_tokenizer_12hz") != "qwen3_tts_tokenizer_12hz":
            raise ValueError(f"only the 12 Hz speech tokenizer is supported, not {data['tokenizer_type']!r}")
        kind = data.get("tts_model_type", "custom_voice")
        if kind not in TASKS:
            raise ValueError(f"unknown tts_model_type {kind!r}; known: {', '.join(TASKS)}")
        talker = dict(data.get("talker_config") or {})
        predictor = CodePredictorConfig.read(talker.get("code_predictor_config"), "talker_config.code_predictor_config")
        return from_json(
            cls, data,
            talker=TalkerConfig.read(talker, "talker_config", code_predictor=predictor),
            speaker_encoder=from_json(SpeakerEncoderConfig, data.get("speaker_encoder_config")) if kind == "base" else None,
            speech_tokenizer=speech_tokenizer,
            generation=from_json(GenerationDefaults, generation),
        )

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages a request may name (lower case), "auto" first; dialects are reached through speakers."""
        return ("auto", *(name for name in self.talker.codec_language_id if "dialect" not in name))

    @property
    def speakers(self) -> tuple[str, ...]:
        return tuple(self.talker.spk_id)
