"""GLM-TTS's speech tokenizer (`speech_tokenizer/`: a WhisperVQ config.json + safetensors): Whisper's encoder up to
`quantize_position`, average-pooled 2x at `pooling_position`, each frame replaced by its nearest codebook entry's index:
25 Hz tokens from 16 kHz audio. The published loader takes `model.encoder.*` only and drops the final layer norm and
the layers past the quantizer; so does this one (declared unused). Attention is block-causal (`quantize_causal_block_size`
frames: causal, plus the whole of a frame's own block) over the valid frames, as published."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.api.config_json import from_json
from vocalis.stages.api.whisper_sizes import WhisperEncoderSizes
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.components.whisper import WhisperEncoderLayer
from vocalis.stages.layers.weights import load_strict, read_safetensors

HOP = 160
RATE = 16000


@dataclass(frozen=True)
class WhisperVQConfig(WhisperEncoderSizes):
    """speech_tokenizer/config.json: a Whisper encoder cut at `quantize_position`, pooled and quantized there."""

    pooling_kernel_size: int | None
    pooling_position: int | None
    pooling_type: str
    quantize_position: int
    quantize_vocab_size: int
    quantize_causal_block_size: int | None
    encoder_causal_attention: bool
    quantize_causal_encoder: bool
    encoder_causal_convolution: bool

    @classmethod
    def from_dir(cls, path: Path) -> WhisperVQConfig:
        return from_json(cls, json.loads((path / "config.json").read_text()), where=f"{path.name}/config.json")


def block_causal_mask(valid: torch.Tensor, block: int | None) -> torch.Tensor:
    """[1, L, L] bool: causal or within the same `block`-frame block, and only valid keys (a `block` of None: all)."""
    length = valid.shape[0]
    position = torch.arange(length, device=valid.device)
    if block is None:
        mask = torch.ones(length, length, dtype=torch.bool, device=valid.device)
    else:
        mask = (position[None, :] <= position[:, None]) | (position[None, :] // block == position[:, None] // block)
    return (mask & valid[None, :])[None]


class WhisperVQEncoder(nn.Module):
    """`conv1`, `conv2`, `embed_positions`, `layers.{0..quantize_position-1}`, `codebook`."""

    def __init__(self, c: WhisperVQConfig) -> None:
        super().__init__()
        if c.encoder_causal_convolution or c.encoder_causal_attention or c.quantize_causal_encoder:
            raise ValueError("speech_tokenizer/config.json: causal encoder variants are not supported (the published one has none)")
        if c.pooling_type != "avg" or c.pooling_position != c.quantize_position:
            raise ValueError("speech_tokenizer/config.json: only average pooling right before the quantizer is supported (as published)")
        self.config = c
        self.conv1 = nn.Conv1d(c.num_mel_bins, c.d_model, 3, padding=1)
        self.conv2 = nn.Conv1d(c.d_model, c.d_model, 3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(c.max_source_positions, c.d_model)
        self.layers = nn.ModuleList(WhisperEncoderLayer(c.d_model, c.encoder_attention_heads, c.encoder_ffn_dim)
                                    for _ in range(c.quantize_position))
        self.codebook = nn.Embedding(c.quantize_vocab_size, c.d_model)

    @property
    def samples_per_token(self) -> int:
        return HOP * 2 * (self.config.pooling_kernel_size or 1)

    def forward(self, features: torch.Tensor, valid_frames: int) -> torch.Tensor:
        """Log-mel [1, mels, F] (F a multiple of 4), of which the first `valid_frames` are audio -> token ids [valid tokens]."""
        c = self.config
        x = F.gelu(self.conv2(F.gelu(self.conv1(features)))).transpose(1, 2)
        length = x.shape[1]
        if length > c.max_source_positions:
            raise ValueError(f"{length} encoder frames exceed the speech tokenizer's {c.max_source_positions} (30 s)")
        x = x + self.embed_positions.weight[:length]
        valid = torch.arange(length, device=x.device) < math.ceil(valid_frames / 2)
        mask = block_causal_mask(valid, c.quantize_causal_block_size)
        for index, layer in enumerate(self.layers):
            x = layer(x, mask)
            if index + 1 == c.pooling_position and c.pooling_kernel_size:
                kernel = c.pooling_kernel_size
                h = x.transpose(1, 2)
                if h.shape[-1] % kernel:
                    h = F.pad(h, (0, kernel - h.shape[-1] % kernel))
                x = F.avg_pool1d(h, kernel).transpose(1, 2)
                valid = valid[::kernel]
                block = c.quantize_causal_block_size // kernel if c.quantize_causal_block_size else None
                mask = block_causal_mask(valid, block)
        flat = x[0]
        codebook = self.codebook.weight
        distances = (codebook.pow(2).sum(1)[None] + flat.pow(2).sum(1, keepdim=True)) - 2 * flat @ codebook.T
        return distances.argmin(dim=1)[valid]


UNUSED = (r"layer_norm\..*", r"embed_positions2\.weight", r"ema_(count|weight)", r"model\.decoder\..*", r"proj_out\..*")
"""What the published loader leaves out (names with `model.encoder.` removed): the layers past the quantizer (added per
config), the final norm, the training-only EMA codebook state and second position table, the Whisper decoder."""


class SpeechTokenizer:
    def __init__(self, path: Path) -> None:
        config = WhisperVQConfig.from_dir(path)
        self.encoder = WhisperVQEncoder(config)
        weights = read_safetensors(path)
        unused = [*UNUSED, *(rf"layers\.{i}\..*" for i in range(config.quantize_position, config.encoder_layers))]
        load_strict(self.encoder, {k.removeprefix("model.encoder."): v for k, v in weights.items()}, path, unused=unused)
        self.encoder.eval()

    def __call__(self, samples_16k: np.ndarray) -> list[int]:
        """Speech tokens (25 Hz) of a clip at 16 kHz, as the published frontend makes them (zero-padded to whole tokens,
        padding masked)."""
        samples = torch.from_numpy(np.asarray(samples_16k, dtype=np.float32))
        stride = self.encoder.samples_per_token
        padded = F.pad(samples, (0, (-len(samples)) % stride))
        features = whisper_log_mel(padded, self.encoder.config.num_mel_bins)[None]
        return self.encoder(features, math.ceil(len(samples) / HOP)).tolist()
