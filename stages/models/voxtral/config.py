"""params.json of a Voxtral TTS checkpoint: the Ministral-class decoder, the acoustic flow transformer, the audio
tokenizer (codec) and the preset voices, with the defaults the published file leaves out."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARAMS_FILE = "params.json"
WEIGHTS_FILE = "consolidated.safetensors"
TEKKEN_FILE = "tekken.json"
VOICE_DIR = "voice_embedding"
AUDIO_SPECIALS = 2
"""Codes 0 ([EMPTY_AUDIO]) and 1 ([END_AUDIO]) precede every codebook's own codes."""
EMPTY_AUDIO, END_AUDIO = 0, 1
DEFAULT_DECODING_STEPS = 7
"""Euler steps of the flow when params.json names none (the peer's default; the published file names none)."""


def round_up(value: int, multiple: int) -> int:
    return multiple * math.ceil(value / multiple)


@dataclass(frozen=True)
class DecoderArgs:
    """The Mistral decoder (top-level keys of params.json)."""

    dim: int
    n_layers: int
    head_dim: int
    hidden_dim: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    rope_theta: float
    norm_eps: float
    max_seq_len: int


@dataclass(frozen=True)
class AcousticArgs:
    """`multimodal.audio_model_args.acoustic_transformer_args`: the flow-matching transformer."""

    input_dim: int
    dim: int
    n_layers: int
    head_dim: int
    hidden_dim: int
    n_heads: int
    n_kv_heads: int
    norm_eps: float
    time_theta: float
    decoding_steps: int


@dataclass(frozen=True)
class CodecArgs:
    """`multimodal.audio_tokenizer_args`: the audio tokenizer's decoder (the open release ships no encoder)."""

    sampling_rate: int
    patch_size: int
    patch_kernel: int
    semantic_codebook_size: int
    semantic_dim: int
    acoustic_levels: int
    acoustic_dim: int
    window: int
    half_window_on_resample: bool
    dim: int
    hidden_dim: int
    head_dim: int
    n_heads: int
    n_kv_heads: int
    qk_norm_eps: float
    norm_eps: float
    encoder_lengths: tuple[int, ...]
    encoder_kernels: tuple[int, ...]
    encoder_strides: tuple[int, ...]
    transformer_lengths: tuple[int, ...]
    kernels: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def latent_dim(self) -> int:
        return self.semantic_dim + self.acoustic_dim

    @property
    def samples_per_frame(self) -> int:
        return self.patch_size * math.prod(self.strides)

    @property
    def first_window(self) -> int:
        """The attention window of the first decoder transformer: the configured one halved by each encoder downsampling."""
        window = self.window
        if self.half_window_on_resample:
            for stride in self.encoder_strides:
                if stride > 1:
                    window //= 2
        return window


@dataclass(frozen=True)
class VoxtralConfig:
    decoder: DecoderArgs
    acoustic: AcousticArgs
    codec: CodecArgs
    semantic_codebook_size: int
    acoustic_levels: int
    n_acoustic: int
    bos_id: int
    audio_token_id: int
    begin_audio_token_id: int
    voices: dict[str, int]
    """Preset name (lower-cased, as the peer lists them) -> index, in the checkpoint's order."""
    voice_files: dict[str, str]
    """Preset name (lower-cased) -> the name as published (voice_embedding/<name>.pt)."""

    @property
    def semantic_logits(self) -> int:
        """Rows of `semantic_codebook_output`: the codes and the audio specials, padded to 128."""
        return round_up(self.semantic_codebook_size + AUDIO_SPECIALS, 128)

    @property
    def codebook_sizes(self) -> list[int]:
        """Each of the 37 codebooks' size with the specials, as the audio-code embedding table stacks them."""
        return [self.semantic_codebook_size + AUDIO_SPECIALS] + [self.acoustic_levels + AUDIO_SPECIALS] * self.n_acoustic

    @property
    def audio_embeddings(self) -> int:
        return round_up(sum(self.codebook_sizes), 128)

    @property
    def num_codebooks(self) -> int:
        return 1 + self.n_acoustic

    @classmethod
    def from_dir(cls, path: Path) -> VoxtralConfig:
        return cls.from_dict(json.loads((Path(path) / PARAMS_FILE).read_text()), Path(path) / PARAMS_FILE)

    @classmethod
    def from_dict(cls, params: dict[str, Any], where: object = PARAMS_FILE) -> VoxtralConfig:
        multimodal = params.get("multimodal") or {}
        model = multimodal.get("audio_model_args") or params.get("audio_model_args")
        codec = multimodal.get("audio_tokenizer_args") or params.get("audio_tokenizer_args")
        if not model or not codec:
            raise ValueError(f"{where}: no multimodal.audio_model_args / audio_tokenizer_args: not a Voxtral TTS checkpoint")
        decoder = DecoderArgs(
            dim=params["dim"], n_layers=params["n_layers"], head_dim=params["head_dim"], hidden_dim=params["hidden_dim"],
            n_heads=params["n_heads"], n_kv_heads=params["n_kv_heads"], vocab_size=params["vocab_size"],
            rope_theta=float(params.get("rope_theta", 1e6)), norm_eps=float(params.get("norm_eps", 1e-5)),
            max_seq_len=int(params.get("max_seq_len", 65536)),
        )
        at = model["acoustic_transformer_args"]
        acoustic = AcousticArgs(
            input_dim=at.get("input_dim", decoder.dim), dim=at["dim"], n_layers=at["n_layers"], head_dim=at["head_dim"],
            hidden_dim=at["hidden_dim"], n_heads=at["n_heads"], n_kv_heads=at["n_kv_heads"],
            norm_eps=float(at.get("norm_eps", 1e-5)), time_theta=10000.0,
            decoding_steps=int(at.get("n_decoding_steps") or DEFAULT_DECODING_STEPS),
        )
        if at.get("use_biases"):
            raise ValueError(f"{where}: acoustic_transformer_args.use_biases is set; the published model has none and this loader supports none")
        if acoustic.dim != acoustic.input_dim or acoustic.input_dim != decoder.dim:
            # semantic_codebook_output reads the decoder's hidden state directly, so the three widths must agree.
            raise ValueError(f"{where}: acoustic_transformer_args dim {acoustic.dim} / input_dim {acoustic.input_dim} must equal dim {decoder.dim}")
        codec_args = CodecArgs(
            sampling_rate=codec.get("sampling_rate", 24000), patch_size=codec.get("pretransform_patch_size", 240),
            patch_kernel=codec.get("patch_proj_kernel_size", 7), semantic_codebook_size=codec.get("semantic_codebook_size", 8192),
            semantic_dim=codec.get("semantic_dim", 256), acoustic_levels=codec.get("acoustic_codebook_size", 21),
            acoustic_dim=codec.get("acoustic_dim", 36), window=codec.get("attn_sliding_window_size", 16),
            half_window_on_resample=codec.get("half_attn_window_upon_downsampling", True), dim=codec.get("dim", 1024),
            hidden_dim=codec.get("hidden_dim", 4096), head_dim=codec.get("head_dim", 128), n_heads=codec.get("n_heads", 8),
            n_kv_heads=codec.get("n_kv_heads", 8), qk_norm_eps=float(codec.get("qk_norm_eps", 1e-6)),
            norm_eps=float(codec.get("norm_eps", 1e-2)),
            encoder_lengths=_ints(codec.get("encoder_transformer_lengths_str", "2,2,2,2")),
            encoder_kernels=_ints(codec.get("encoder_convs_kernels_str", "4,4,4,3")),
            encoder_strides=_ints(codec.get("encoder_convs_strides_str", "2,2,2,1")),
            transformer_lengths=_ints(codec.get("decoder_transformer_lengths_str", "2,2,2,2")),
            kernels=_ints(codec.get("decoder_convs_kernels_str", "3,4,4,4")),
            strides=_ints(codec.get("decoder_convs_strides_str", "1,2,2,2")),
        )
        for flag, wanted in (("causal", True), ("qk_norm", True), ("layer_scale", True), ("conv_weight_norm", True), ("channels", 1),
                             ("use_biases", False)):
            if codec.get(flag, wanted) != wanted:
                raise ValueError(f"{where}: audio_tokenizer_args.{flag} = {codec[flag]!r}; this loader supports {wanted!r} (the published value)")
        if model["n_acoustic_codebook"] != codec_args.acoustic_dim or model["acoustic_codebook_size"] != codec_args.acoustic_levels:
            raise ValueError(f"{where}: audio_model_args and audio_tokenizer_args disagree on the acoustic codebooks")
        voice_map = codec.get("voice") or {}
        ordered = sorted(voice_map.items(), key=lambda item: item[1])
        return cls(
            decoder=decoder, acoustic=acoustic, codec=codec_args,
            semantic_codebook_size=model["semantic_codebook_size"], acoustic_levels=model["acoustic_codebook_size"],
            n_acoustic=model["n_acoustic_codebook"], bos_id=int(multimodal.get("bos_token_id", 1)),
            audio_token_id=int(model.get("audio_token_id", 24)), begin_audio_token_id=int(model.get("begin_audio_token_id", 25)),
            voices={name.lower(): index for name, index in ordered}, voice_files={name.lower(): name for name, _ in ordered},
        )


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split(",") if part.strip())
