"""The 12 Hz speech tokenizer: its decoder (codes to 24 kHz audio) and its Mimi encoder (audio to
reference codes), named as in `speech_tokenizer/model.safetensors` (`decoder.*`, `encoder.*`).

Everything in the decoder is causal: convolutions pad on the left, transposed convolutions trim on
the right, and the transformer attends to the last `sliding_window` frames. A frame's samples
therefore depend only on earlier frames, which is what lets code2wav decode in chunks: `SpeechDecoder.stream`
decodes a request's next frames from its `StreamState` (every convolution's last inputs, every transposed
convolution's overlap tail, every transformer layer's keys and values over its window, the frames so far), equal
to decoding all its frames at once, at the cost of the new frames alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.causal_stream import CausalStream, StreamState
from vocalis.stages.layers.attention import QKVAttention, causal_mask
from vocalis.stages.layers.audio_blocks import (
    BlockSequence,
    CausalConvNeXtBlock,
    CausalConvTranspose1d,
    Nested,
    ResidualUnit,
    SnakeBeta,
    nearest_code,
    nested_causal_conv,
    residual_encode,
    snake_residual_units,
    summed_lookup,
)
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.layers.transformer import PreNormDecoderLayer, gated_decoder_layers
from vocalis.stages.models.qwen3_tts.config import DecoderConfig, MimiEncoderConfig

# -- convolutions ----------------------------------------------------------------------------------


class DecoderBlock(BlockSequence):
    """SnakeBeta, an upsampling transposed conv (x rate), three dilated residual units."""

    def __init__(self, in_dim: int, out_dim: int, rate: int) -> None:
        super().__init__(
            SnakeBeta(in_dim), Nested(CausalConvTranspose1d(in_dim, out_dim, 2 * rate, rate)),
            *snake_residual_units(out_dim, lambda i, o, k, d: nested_causal_conv(i, o, k, dilation=d), SnakeBeta,
                                  names=("act1", "conv1", "act2", "conv2")),
        )

    def stream(self, x: torch.Tensor, carry: CausalStream) -> torch.Tensor:
        return carry.run(self.block, x)


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
        total = summed_lookup(codes.transpose(1, 2), [layer._codebook.centroids() for layer in self.vq.layers])
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


class DecoderTransformer(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.input_proj = nn.Linear(config.latent_dim, config.hidden_size)
        self.layers = gated_decoder_layers(config, layer_scale=True)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.output_proj = nn.Linear(config.hidden_size, config.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, latent] to [B, T, latent]."""
        c = self.config
        x = self.input_proj(x)
        t = x.shape[1]
        cos, sin = rope(torch.arange(t, device=x.device), c.head_dim, c.rope_theta)
        mask = causal_mask(t, c.sliding_window, device=x.device)
        for layer in self.layers:
            x = layer.dense(x, (cos.to(x.dtype), sin.to(x.dtype)), mask)
        return self.output_proj(self.norm(x))

    def stream(self, x: torch.Tensor, carry: CausalStream, positions: Sequence[int]) -> torch.Tensor:
        """x [B, L, latent] of each row's next frames (right-padded), positions[i] the frames row i decoded before:
        each layer attends over the keys and values its row carries (the last sliding_window - 1 positions, zeros
        and masked before position 0) and the new ones, at the same RoPE positions as a whole decode."""
        c = self.config
        x = self.input_proj(x)
        at, mask = carry.window_mask(positions, x.shape[1], c.sliding_window, x.device)
        cos, sin = rope(at, c.head_dim, c.rope_theta)  # [B, L, D]
        held = c.sliding_window - 1
        for layer in self.layers:
            attention = layer.self_attn
            kv = carry.carried_kv(attention, x.new_zeros(1, c.num_key_value_heads, held, c.head_dim))
            x = layer.dense(x, (cos.to(x.dtype), sin.to(x.dtype)), mask, kv=kv)
            carry.keep_kv(attention, kv, held)
        return self.output_proj(self.norm(x))


class SpeechDecoder(nn.Module):
    """`decoder.*`: codes [B, K, T] to samples [B, T * samples_per_frame] in [-1, 1]."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.quantizer = SplitRVQ(config)
        self.pre_conv = nested_causal_conv(config.codebook_dim, config.latent_dim, 3)
        self.pre_transformer = DecoderTransformer(config)
        self.upsample = nn.ModuleList(
            nn.ModuleList([Nested(CausalConvTranspose1d(config.latent_dim, config.latent_dim, factor, factor)), CausalConvNeXtBlock(config.latent_dim)])
            for factor in config.upsampling_ratios
        )
        blocks: list[nn.Module] = [nested_causal_conv(config.latent_dim, config.decoder_dim, 7)]
        for i, rate in enumerate(config.upsample_rates):
            blocks.append(DecoderBlock(config.decoder_dim // 2**i, config.decoder_dim // 2 ** (i + 1), rate))
        out_dim = config.decoder_dim // 2 ** len(config.upsample_rates)
        blocks += [SnakeBeta(out_dim), nested_causal_conv(out_dim, 1, 7)]
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

    def stream(self, codes: torch.Tensor, states: Sequence[StreamState], frames: Sequence[int],
               skip: Sequence[int] | None = None) -> torch.Tensor:
        """codes [B, K, L] of each row's next frames[i] frames (right-padded to L) to the samples of all but each row's
        first skip[i] (default none), equal to those of decoding all its frames at once: [B, max(frames - skip) *
        samples_per_frame], row i's first (frames[i] - skip[i]) * samples_per_frame valid. states[i] advances past
        all frames[i].

        Skipped frames (an ICL clone's reference codes) go through the transformer, but through the convolutions
        after it only the last `conv_stack_frames` of them: what those convolutions carry on reads no further back."""
        if codes.shape[1] != self.config.num_quantizers:
            raise ValueError(f"expected {self.config.num_quantizers} codebooks, got {codes.shape[1]}")
        skip = [0] * len(frames) if skip is None else list(skip)
        carry = CausalStream([state.carry for state in states], frames)
        x = carry.run(self.pre_conv, self.quantizer.decode(codes))
        x = self.pre_transformer.stream(x.transpose(1, 2), carry, [state.frames for state in states])
        for state, count in zip(states, frames, strict=True):
            state.frames += count
        starts = [max(0, s - self.config.conv_stack_frames) for s in skip]
        if any(starts):  # each row from its own start: a new batch of shorter rows
            x = _from_starts(x.transpose(1, 2), starts, [f - s for f, s in zip(frames, starts, strict=True)]).transpose(1, 2)
            carry = CausalStream(carry.rows, [f - s for f, s in zip(frames, starts, strict=True)])
        x = x.transpose(1, 2)
        for transposed, convnext in self.upsample:
            x = carry.run(convnext, carry.run(transposed, x))
        samples = carry.run(self.decoder, x).clamp(-1.0, 1.0)
        hop = self.config.samples_per_frame
        dropped = [(s - start) * hop for s, start in zip(skip, starts, strict=True)]
        if not any(dropped):
            return samples[:, 0]
        return _from_starts(samples, dropped, [(f - s) * hop for f, s in zip(frames, skip, strict=True)])[:, 0]


def _from_starts(x: torch.Tensor, starts: Sequence[int], lengths: Sequence[int]) -> torch.Tensor:
    """x [B, C, T] with row i's [starts[i], starts[i] + lengths[i]) moved to its front, right-padded with zeros."""
    longest = max(lengths)
    return torch.stack([F.pad(x[i, :, start : start + n], (0, longest - n)) for i, (start, n) in enumerate(zip(starts, lengths, strict=True))])


# -- the Mimi encoder ------------------------------------------------------------------------------


def mimi_resnet_block(config: MimiEncoderConfig, dim: int, dilation: int) -> ResidualUnit:
    """ELU, a dilated causal conv down to dim / compress channels, ELU, a 1x1 conv back (`block.{0..3}`)."""
    c, hidden = config, dim // config.compress
    return ResidualUnit(nn.ELU(), nested_causal_conv(dim, hidden, c.residual_kernel_size, dilation=dilation, pad_mode=c.pad_mode),
                        nn.ELU(), nested_causal_conv(hidden, dim, 1, pad_mode=c.pad_mode))


class SEANetEncoder(nn.Module):
    def __init__(self, config: MimiEncoderConfig) -> None:
        super().__init__()
        c = config
        layers: list[nn.Module] = [nested_causal_conv(c.audio_channels, c.num_filters, c.kernel_size, pad_mode=c.pad_mode)]
        scale = 1
        for ratio in reversed(c.upsampling_ratios):
            width = scale * c.num_filters
            for j in range(c.num_residual_layers):
                layers.append(mimi_resnet_block(c, width, c.dilation_growth_rate**j))
            layers += [nn.ELU(), nested_causal_conv(width, width * 2, ratio * 2, stride=ratio, pad_mode=c.pad_mode)]
            scale *= 2
        layers += [nn.ELU(), nested_causal_conv(scale * c.num_filters, c.hidden_size, c.last_kernel_size, pad_mode=c.pad_mode)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class MimiMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, intermediate, bias=False)
        self.fc2 = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


def mimi_transformer_layer(c: MimiEncoderConfig) -> PreNormDecoderLayer:
    attention = QKVAttention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.attention_bias)
    return PreNormDecoderLayer(c.hidden_size, attention, MimiMLP(c.hidden_size, c.intermediate_size),
                               lambda dim: nn.LayerNorm(dim, eps=c.norm_eps), layer_scale=True)


class MimiTransformer(nn.Module):
    """Fully causal (the reference's eager/SDPA path applies no sliding window here)."""

    def __init__(self, config: MimiEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(mimi_transformer_layer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        cos, sin = rope(torch.arange(t, device=x.device), self.config.head_dim, self.config.rope_theta)
        mask = causal_mask(t, device=x.device)
        for layer in self.layers:
            x = layer.dense(x, (cos.to(x.dtype), sin.to(x.dtype)), mask)
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

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Nearest-centroid codes [...] of x [..., D]."""
        return nearest_code(x.reshape(-1, x.shape[-1]), self.codebook.centroids()).view(x.shape[:-1])

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return F.embedding(codes, self.codebook.centroids())


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
        return torch.stack(residual_encode(x.transpose(1, 2), self.layers[:count]))


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
        self.downsample = nested_causal_conv(config.hidden_size, config.hidden_size, 2 * stride, stride=2, bias=False, pad_mode="replicate")
        self.quantizer = MimiSplitRVQ(config)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        x = self.encoder(samples[:, None])
        x = self.encoder_transformer(x.transpose(1, 2)).transpose(1, 2)
        codes = self.quantizer.encode(self.downsample(x), self.num_quantizers)  # [K, B, T]
        frames = -(-samples.shape[-1] // self.downsample_rate)
        return codes.permute(1, 2, 0)[:, :frames]
