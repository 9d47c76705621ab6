"""The wav2vec 2.0 / HuBERT speech encoder, in the layout of transformers' `Wav2Vec2Model` and `HubertModel`.

A convolutional feature extractor (20 ms frames at 16 kHz), a projection, a grouped positional
convolution and a transformer encoder. Both published arrangements: "base" (only the first
convolution group-normed, post-norm layers, `feat_extract_norm: group`, `do_stable_layer_norm:
false`) and "large/MMS" (every convolution layer-normed, pre-norm layers with a final norm,
`layer` and `true`). Module names follow the checkpoints (`feature_extractor.conv_layers.0.conv`,
`encoder.layers.0.attention.q_proj`, ...). Used by OmniVoice's codec (HuBERT base) and by the
forced aligner (`Wav2Vec2ForCTC`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.api.config_json import from_json


@dataclass(frozen=True)
class Wav2Vec2Config:
    """The encoder's settings, as config.json names them (model_type "wav2vec2" or "hubert")."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    conv_dim: tuple[int, ...] = (512,) * 7
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    conv_bias: bool = False
    num_conv_pos_embeddings: int = 128
    num_conv_pos_embedding_groups: int = 16
    layer_norm_eps: float = 1e-5
    feat_proj_layer_norm: bool = True
    feat_extract_norm: str = "group"
    """"group": the first convolution group-normed (base); "layer": each one layer-normed (large, MMS)."""
    do_stable_layer_norm: bool = False
    """Pre-norm layers and a final norm (large, MMS); else post-norm layers after a first norm (base)."""
    vocab_size: int = 32
    pad_token_id: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "config") -> Wav2Vec2Config:
        checks = {
            "hidden_act": "gelu",
            "feat_extract_activation": "gelu",
            "conv_pos_batch_norm": False,
            "add_adapter": False,
        }
        for key, wanted in checks.items():
            if data.get(key, wanted) != wanted:
                raise ValueError(f"{where}.{key} = {data[key]!r}: only {wanted!r} is supported")
        if data.get("feat_extract_norm", "group") not in ("group", "layer"):
            raise ValueError(f"{where}.feat_extract_norm = {data['feat_extract_norm']!r}: only 'group' or 'layer'")
        return from_json(cls, data)

    @property
    def samples_per_frame(self) -> int:
        """Input samples per output frame (320: 20 ms at 16 kHz)."""
        total = 1
        for stride in self.conv_stride:
            total *= stride
        return total


class ConvLayer(nn.Module):
    def __init__(self, config: Wav2Vec2Config, index: int) -> None:
        super().__init__()
        in_channels = config.conv_dim[index - 1] if index > 0 else 1
        out_channels = config.conv_dim[index]
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size=config.conv_kernel[index], stride=config.conv_stride[index], bias=config.conv_bias
        )
        self.channels_norm = config.feat_extract_norm == "layer"
        if self.channels_norm:
            self.layer_norm: nn.Module | None = nn.LayerNorm(out_channels, elementwise_affine=True)
        else:  # base: only the first layer is group-normed (one group per channel)
            self.layer_norm = nn.GroupNorm(out_channels, out_channels, affine=True) if index == 0 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x.transpose(-2, -1)).transpose(-2, -1) if self.channels_norm else self.layer_norm(x)
        return F.gelu(x)


class FeatureExtractor(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.conv_layers = nn.ModuleList(ConvLayer(config, i) for i in range(len(config.conv_dim)))

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        x = samples[:, None]
        for layer in self.conv_layers:
            x = layer(x)
        return x


class FeatureProjection(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(config.conv_dim[-1], eps=config.layer_norm_eps) if config.feat_proj_layer_norm else None
        self.projection = nn.Linear(config.conv_dim[-1], config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return self.projection(x)


class PositionalConv(nn.Module):
    """A grouped convolution over time; its weight is stored weight-normed (over dim 2) or plain."""

    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        kernel = config.num_conv_pos_embeddings
        self.conv = nn.Conv1d(
            config.hidden_size, config.hidden_size, kernel_size=kernel, padding=kernel // 2,
            groups=config.num_conv_pos_embedding_groups,
        )
        self.trim = 1 if kernel % 2 == 0 else 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.transpose(1, 2))
        if self.trim:
            y = y[:, :, : -self.trim]
        return F.gelu(y).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        width = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        shape = (batch, length, self.num_heads, width // self.num_heads)
        q, k, v = (proj(x).view(shape).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, width))


class FeedForward(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output_dense = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class EncoderLayer(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.pre_norm = config.do_stable_layer_norm
        self.attention = Attention(config)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attention(self.layer_norm(x))
            return x + self.feed_forward(self.final_layer_norm(x))
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class Encoder(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.pre_norm = config.do_stable_layer_norm
        self.pos_conv_embed = PositionalConv(config)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Every hidden state: the input to the first layer, then each layer's output (the last one normed when pre-norm)."""
        x = x + self.pos_conv_embed(x)
        if not self.pre_norm:
            x = self.layer_norm(x)
        states = [x]
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        if self.pre_norm:
            states[-1] = self.layer_norm(x)
        return states


class Wav2Vec2Model(nn.Module):
    """Waveforms [B, N] at 16 kHz to hidden states [B, N / 320, hidden] (HubertModel has the same modules)."""

    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.feature_extractor = FeatureExtractor(config)
        self.feature_projection = FeatureProjection(config)
        self.encoder = Encoder(config)

    def forward(self, samples: torch.Tensor) -> list[torch.Tensor]:
        features = self.feature_extractor(samples).transpose(1, 2)
        return self.encoder(self.feature_projection(features))
