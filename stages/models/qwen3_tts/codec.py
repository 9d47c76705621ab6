"""The 12 Hz speech tokenizer: its decoder (codes to 24 kHz audio) and its Mimi encoder (audio to
reference codes), named as in `speech_tokenizer/model.safetensors` (`decoder.*`, `encoder.*`).

Everything in the decoder is causal: convolutions pad on the left, transposed convolutions trim on
the right, and the transformer attends to the last `sliding_window` frames. A frame's samples
therefore depend only on earlier frames, which is what lets code2wav decode in chunks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.models.qwen3_tts.config import DecoderConfig, MimiEncoderConfig
from vocalis.stages.models.qwen3_tts.layers import DenseAttention, GatedMLP, RMSNorm, causal_mask, rotary

# -- convolutions ----------------------------------------------------------------------------------


class CausalConv(nn.Module):
    """Conv1d padded on the left by (kernel - stride), and on the right just enough for whole strides."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1, stride: int = 1,
                 groups: int = 1, bias: bool = True, pad_mode: str = "constant") -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, groups=groups, bias=bias)
        self.stride = stride
        self.kernel = (kernel_size - 1) * dilation + 1
        self.padding = self.kernel - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        frames = math.ceil((length - self.kernel + self.padding) / self.stride + 1)
        extra = (frames - 1) * self.stride + (self.kernel - self.padding) - length
        x = F.pad(x, (self.padding, extra), mode=self.pad_mode) if self.pad_mode != "constant" else F.pad(x, (self.padding, extra))
        return self.conv(x)


class CausalTransposedConv(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.trim = kernel_size - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return x[..., : x.shape[-1] - self.trim] if self.trim > 0 else x


class SnakeBeta(nn.Module):
    """x + sin^2(x * e^alpha) / e^beta, per channel (alpha and beta stored in log scale)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.exp()[None, :, None]
        beta = self.beta.exp()[None, :, None]
        return x + torch.sin(x * alpha).pow(2) / (beta + 1e-9)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.dwconv(x).transpose(1, 2))
        h = self.gamma * self.pwconv2(F.gelu(self.pwconv1(h)))
        return x + h.transpose(1, 2)


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.act2(self.conv1(self.act1(x))))


class DecoderBlock(nn.Module):
    """SnakeBeta, an upsampling transposed conv (x rate), three dilated residual units."""

    def __init__(self, in_dim: int, out_dim: int, rate: int) -> None:
        super().__init__()
        self.block = nn.ModuleList(
            [SnakeBeta(in_dim), CausalTransposedConv(in_dim, out_dim, 2 * rate, rate)]
            + [ResidualUnit(out_dim, dilation) for dilation in (1, 3, 9)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.block:
            x = layer(x)
        return x


# -- quantizers ------------------------------------------------------------------------------------


class Codebook(nn.Module):
    """`_codebook`: centroids are embedding_sum / cluster_usage (the EMA statistics of training)."""

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))

    def centroids(self) -> torch.Tensor:
        return self.embedding_sum / self.cluster_usage.clamp(min=1e-5)[:, None]


class CodebookLayer(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self._codebook = Codebook(size, dim)


class CodebookStack(nn.Module):
    def __init__(self, count: int, size: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(CodebookLayer(size, dim) for _ in range(count))


class DecoderRVQ(nn.Module):
    """`rvq_first` / `rvq_rest`: a sum of codebook lookups, projected out. (input_proj serves encoding only.)"""

    def __init__(self, count: int, size: int, dim: int, outer_dim: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(outer_dim, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, outer_dim, 1, bias=False)
        self.vq = CodebookStack(count, size, dim)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, K, T] to [B, outer_dim, T]."""
        total = 0
        for k, layer in enumerate(self.vq.layers):
            total = total + F.embedding(codes[:, k], layer._codebook.centroids())
        return self.output_proj(total.transpose(1, 2))


class SplitRVQ(nn.Module):
    """The first (semantic) codebook and the rest (acoustic), each with its own projections."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        dim = config.codebook_dim // 2
        self.rvq_first = DecoderRVQ(1, config.codebook_size, dim, config.codebook_dim)
        self.rvq_rest = DecoderRVQ(config.num_quantizers - 1, config.codebook_size, dim, config.codebook_dim)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.rvq_first.decode(codes[:, :1]) + self.rvq_rest.decode(codes[:, 1:])


# -- the decoder -----------------------------------------------------------------------------------


class LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class DecoderTransformerLayer(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        c = config
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = DenseAttention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.dim_per_head, c.attention_bias)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size)
        self.self_attn_layer_scale = LayerScale(c.hidden_size)
        self.mlp_layer_scale = LayerScale(c.hidden_size)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class DecoderTransformer(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.input_proj = nn.Linear(config.latent_dim, config.hidden_size)
        self.layers = nn.ModuleList(DecoderTransformerLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.output_proj = nn.Linear(config.hidden_size, config.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, latent] to [B, T, latent]."""
        c = self.config
        x = self.input_proj(x)
        t = x.shape[1]
        cos, sin = rotary(torch.arange(t, device=x.device), c.dim_per_head, c.rope_theta)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        mask = causal_mask(t, c.sliding_window, device=x.device)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output_proj(self.norm(x))


class SpeechDecoder(nn.Module):
    """`decoder.*`: codes [B, K, T] to samples [B, T * samples_per_frame] in [-1, 1]."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.quantizer = SplitRVQ(config)
        self.pre_conv = CausalConv(config.codebook_dim, config.latent_dim, 3)
        self.pre_transformer = DecoderTransformer(config)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalTransposedConv(config.latent_dim, config.latent_dim, factor, factor), ConvNeXtBlock(config.latent_dim)])
            for factor in config.upsampling_ratios
        )
        blocks: list[nn.Module] = [CausalConv(config.latent_dim, config.decoder_dim, 7)]
        for i, rate in enumerate(config.upsample_rates):
            blocks.append(DecoderBlock(config.decoder_dim // 2**i, config.decoder_dim // 2 ** (i + 1), rate))
        out_dim = config.decoder_dim // 2 ** len(config.upsample_rates)
        blocks += [SnakeBeta(out_dim), CausalConv(out_dim, 1, 7)]
        self.decoder = nn.ModuleList(blocks)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        if codes.shape[1] != self.config.num_quantizers:
            raise ValueError(f"expected {self.config.num_quantizers} codebooks, got {codes.shape[1]}")
        x = self.pre_conv(self.quantizer.decode(codes))
        x = self.pre_transformer(x.transpose(1, 2)).transpose(1, 2)
        for transposed, convnext in self.upsample:
            x = convnext(transposed(x))
        for layer in self.decoder:
            x = layer(x)
        return x.clamp(-1.0, 1.0)[:, 0]


# -- the Mimi encoder ------------------------------------------------------------------------------


class MimiResnetBlock(nn.Module):
    def __init__(self, config: MimiEncoderConfig, dim: int, dilation: int) -> None:
        super().__init__()
        hidden = dim // config.compress
        self.block = nn.ModuleList([
            nn.ELU(), CausalConv(dim, hidden, config.residual_kernel_size, dilation=dilation, pad_mode=config.pad_mode),
            nn.ELU(), CausalConv(hidden, dim, 1, pad_mode=config.pad_mode),
        ])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        for layer in self.block:
            x = layer(x)
        return residual + x


class SEANetEncoder(nn.Module):
    def __init__(self, config: MimiEncoderConfig) -> None:
        super().__init__()
        c = config
        layers: list[nn.Module] = [CausalConv(c.audio_channels, c.num_filters, c.kernel_size, pad_mode=c.pad_mode)]
        scale = 1
        for ratio in reversed(c.upsampling_ratios):
            width = scale * c.num_filters
            for j in range(c.num_residual_layers):
                layers.append(MimiResnetBlock(c, width, c.dilation_growth_rate**j))
            layers += [nn.ELU(), CausalConv(width, width * 2, ratio * 2, stride=ratio, pad_mode=c.pad_mode)]
            scale *= 2
        layers += [nn.ELU(), CausalConv(scale * c.num_filters, c.hidden_size, c.last_kernel_size, pad_mode=c.pad_mode)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class MimiMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, intermediate, bias=False)
        self.fc2 = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class MimiTransformerLayer(nn.Module):
    def __init__(self, config: MimiEncoderConfig) -> None:
        super().__init__()
        c = config
        self.input_layernorm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)
        self.self_attn = DenseAttention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.dim_per_head, c.attention_bias)
        self.post_attention_layernorm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)
        self.mlp = MimiMLP(c.hidden_size, c.intermediate_size)
        self.self_attn_layer_scale = LayerScale(c.hidden_size)
        self.mlp_layer_scale = LayerScale(c.hidden_size)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class MimiTransformer(nn.Module):
    """Fully causal (the reference's eager/SDPA path applies no sliding window here)."""

    def __init__(self, config: MimiEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(MimiTransformerLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        cos, sin = rotary(torch.arange(t, device=x.device), self.config.dim_per_head, self.config.rope_theta)
        mask = causal_mask(t, device=x.device)
        for layer in self.layers:
            x = layer(x, cos.to(x.dtype), sin.to(x.dtype), mask)
        return x


class MimiCodebook(nn.Module):
    """`codebook`: buffers in the reference (initialized, cluster_usage, embed_sum); nearest centroid by L2."""

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("initialized", torch.ones(1))
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embed_sum", torch.zeros(size, dim))

    def centroids(self) -> torch.Tensor:
        return self.embed_sum / self.cluster_usage.clamp(min=1e-5)[:, None]


class MimiVQ(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.codebook = MimiCodebook(size, dim)


class MimiRVQ(nn.Module):
    def __init__(self, config: MimiEncoderConfig, count: int) -> None:
        super().__init__()
        c = config
        self.layers = nn.ModuleList(MimiVQ(c.codebook_size, c.codebook_dim) for _ in range(count))
        if c.vector_quantization_hidden_dimension != c.hidden_size:
            self.input_proj = nn.Conv1d(c.hidden_size, c.vector_quantization_hidden_dimension, 1, bias=False)
            self.output_proj = nn.Conv1d(c.vector_quantization_hidden_dimension, c.hidden_size, 1, bias=False)  # decoding only
        else:
            self.input_proj = self.output_proj = None

    def encode(self, x: torch.Tensor, count: int) -> torch.Tensor:
        """x [B, hidden, T] to codes [count, B, T], each stage quantizing what the previous left."""
        if self.input_proj is not None:
            x = self.input_proj(x)
        residual = x.transpose(1, 2)  # [B, T, D]
        codes = []
        for layer in self.layers[:count]:
            centroids = layer.codebook.centroids()
            distances = torch.cdist(residual.reshape(1, -1, residual.shape[-1]).float(), centroids[None].float())[0]
            index = distances.argmin(-1).view(residual.shape[:-1])
            residual = residual - F.embedding(index, centroids)
            codes.append(index)
        return torch.stack(codes)


class MimiSplitRVQ(nn.Module):
    def __init__(self, config: MimiEncoderConfig) -> None:
        super().__init__()
        self.semantic_count = config.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = MimiRVQ(config, config.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = MimiRVQ(config, config.num_quantizers - config.num_semantic_quantizers)

    def encode(self, x: torch.Tensor, count: int) -> torch.Tensor:
        codes = self.semantic_residual_vector_quantizer.encode(x, self.semantic_count)
        if count > self.semantic_count:
            acoustic = self.acoustic_residual_vector_quantizer.encode(x, count - self.semantic_count)
            codes = torch.cat([codes, acoustic])
        return codes


class SpeechEncoder(nn.Module):
    """`encoder.*`: 24 kHz samples [B, N] to codes [B, T, K] at 12.5 Hz (T = ceil(N / 1920))."""

    def __init__(self, config: MimiEncoderConfig, num_quantizers: int, downsample_rate: int) -> None:
        super().__init__()
        self.config = config
        self.num_quantizers = num_quantizers
        self.downsample_rate = downsample_rate
        self.encoder = SEANetEncoder(config)
        self.encoder_transformer = MimiTransformer(config)
        stride = int(config.encodec_frame_rate / config.frame_rate)
        self.downsample = CausalConv(config.hidden_size, config.hidden_size, 2 * stride, stride=2, bias=False, pad_mode="replicate")
        self.quantizer = MimiSplitRVQ(config)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        x = self.encoder(samples[:, None])
        x = self.encoder_transformer(x.transpose(1, 2)).transpose(1, 2)
        codes = self.quantizer.encode(self.downsample(x), self.num_quantizers)  # [K, B, T]
        frames = -(-samples.shape[-1] // self.downsample_rate)
        return codes.permute(1, 2, 0)[:, :frames]
