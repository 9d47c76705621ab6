"""The audio tokenizer's decoder (`audio_tokenizer.*`): codes -> 24 kHz waveform, 1920 samples per frame.

Semantic code -> its codebook row (embedding_sum / cluster_usage), 36 acoustic FSQ codes -> values in [-1, 1]; the
292-d latent goes through a causal conv, then transformer stages with causal convs transposed between them (x2
each), then a causal conv to 240-sample patches. Attention is causal, ALiBi-biased and windowed (the window doubles
with each upsampling), q/k RMS-normed over all heads together, branches layer-scaled. Everything is causal, so a
frame's samples depend on earlier frames only: `AudioTokenizerDecoder.stream` decodes a request's next frames from
its `StreamState` (each convolution's last inputs, each transposed convolution's overlap tail, each attention layer's
keys and values over its window), equal to decoding all its frames at once, at the cost of the new frames alone.
Parameter names are the checkpoint's (weight norm folded into `conv.weight` at load).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.causal_stream import CausalStream, StreamState
from vocalis.stages.layers.audio_blocks import CausalConvTranspose1d, Nested, nested_causal_conv
from vocalis.stages.layers.mlp import SwiGLU
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.models.voxtral.config import AUDIO_SPECIALS, END_AUDIO, CodecArgs


def alibi_slopes(heads: int) -> torch.Tensor:
    """Per-head slopes in (2^-8, 1]: a geometric series from 1 (interleaved from a finer one for a non-power of 2)."""

    def series(n: int) -> list[float]:
        ratio = 2.0 ** (-8.0 / n)
        return [ratio**i for i in range(n)]

    if math.log2(heads).is_integer():
        return torch.tensor(series(heads))
    base = 2 ** math.floor(math.log2(heads))
    return torch.tensor(series(base) + series(2 * base)[::2][: heads - base])


def causal_conv(channels_in: int, channels_out: int, kernel: int, stride: int = 1, pad_mode: str = "reflect") -> Nested:
    """Padded on the left by kernel - stride (replicate or reflect), on the right to whole strides."""
    return nested_causal_conv(channels_in, channels_out, kernel, stride, bias=False, pad_mode=pad_mode)


class CodecAttention(nn.Module):
    def __init__(self, args: CodecArgs, window: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.window = args.n_heads, args.n_kv_heads, args.head_dim, window
        self.wq = nn.Linear(args.dim, args.n_heads * args.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * args.head_dim, args.dim, bias=False)
        self.q_norm = RMSNorm(args.n_heads * args.head_dim, args.qk_norm_eps)
        self.k_norm = RMSNorm(args.n_kv_heads * args.head_dim, args.qk_norm_eps)
        self.register_buffer("slopes", alibi_slopes(args.n_heads), persistent=False)

    def bias(self, length: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """[H, L, L]: slope * (j - i) for keys j in [i - window, i], -inf elsewhere."""
        position = torch.arange(length, device=device)
        relative = position[None, :] - position[:, None]
        bias = self.slopes.to(device, dtype)[:, None, None] * relative.to(dtype)
        return bias.masked_fill((relative > 0) | (relative < -self.window), -math.inf)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        return self._attend(q, k, v, self.bias(x.shape[1], x.device, q.dtype)[None])

    def stream(self, x: torch.Tensor, carry: CausalStream, positions: Sequence[int]) -> torch.Tensor:
        """x [B, L, dim] of each row's next positions (right-padded), positions[i] those row i attended before: over
        the last `window` keys and values its row carries (before its position 0 masked) and the new ones."""
        q, k, v = self._qkv(x)
        length, held = x.shape[1], self.window
        _, mask = carry.window_mask(positions, length, held + 1, x.device)  # [B, 1, L, held + L]
        relative = torch.arange(-held, length, device=x.device)[None, :] - torch.arange(length, device=x.device)[:, None]
        bias = (self.slopes.to(x.device, q.dtype)[:, None, None] * relative.to(q.dtype)).masked_fill(~mask, -math.inf)
        kv = carry.carried_kv(self, k.new_zeros(1, self.kv_heads, held, self.head_dim))
        kv = [torch.cat([kv[0], k], dim=2), torch.cat([kv[1], v], dim=2)]
        carry.keep_kv(self, kv, held)
        return self._attend(q, *kv, bias)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, length, _ = x.shape
        q = self.q_norm(self.wq(x)).view(b, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_norm(self.wk(x)).view(b, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, length, self.kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=self.heads != self.kv_heads)
        return self.wo(out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1))


class CodecBlock(nn.Module):
    def __init__(self, args: CodecArgs, window: int) -> None:
        super().__init__()
        self.attention = CodecAttention(args, window)
        self.feed_forward = SwiGLU(args.dim, args.hidden_dim)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
        self.attention_scale = nn.Parameter(torch.ones(args.dim))
        self.ffn_scale = nn.Parameter(torch.ones(args.dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._ffn(x + self.attention_scale * self.attention(self.attention_norm(x)))

    def stream(self, x: torch.Tensor, carry: CausalStream, positions: Sequence[int]) -> torch.Tensor:
        return self._ffn(x + self.attention_scale * self.attention.stream(self.attention_norm(x), carry, positions))

    def _ffn(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ffn_scale * self.feed_forward(self.ffn_norm(x))


class CodecTransformer(nn.Module):
    def __init__(self, args: CodecArgs, layers: int, window: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(CodecBlock(args, window) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def stream(self, x: torch.Tensor, carry: CausalStream, positions: Sequence[int]) -> torch.Tensor:
        for layer in self.layers:
            x = layer.stream(x, carry, positions)
        return x


class SemanticCodebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embedding_sum", torch.zeros(size, dim))

    @property
    def embedding(self) -> torch.Tensor:
        return self.embedding_sum / self.cluster_usage.clamp(min=1e-5)[:, None]

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return F.embedding(codes, self.embedding)

    def nearest(self, x: torch.Tensor) -> torch.Tensor:
        """Codes [N] of the rows nearest (Euclidean) to x [N, dim]."""
        return torch.cdist(x, self.embedding.to(x.device, x.dtype)).argmin(dim=-1)


class Quantizer(nn.Module):
    """`quantizer.*`: the semantic codebook (the acoustic FSQ codes have no tensors)."""

    def __init__(self, args: CodecArgs) -> None:
        super().__init__()
        self.semantic_codebook = SemanticCodebook(args.semantic_codebook_size, args.semantic_dim)


class AudioTokenizerDecoder(nn.Module):
    def __init__(self, args: CodecArgs) -> None:
        super().__init__()
        self.args = args
        window = args.first_window
        blocks: list[nn.Module] = [causal_conv(args.latent_dim, args.dim, args.kernels[0], args.strides[0], pad_mode="replicate")]
        if args.half_window_on_resample and args.strides[0] > 1:
            window *= 2
        for i, layers in enumerate(args.transformer_lengths):
            blocks.append(CodecTransformer(args, layers, window))
            last = i + 1 == len(args.transformer_lengths)
            if not last and (args.kernels[i + 1] != 1 or args.strides[i + 1] != 1):
                blocks.append(Nested(CausalConvTranspose1d(args.dim, args.dim, args.kernels[i + 1], args.strides[i + 1], bias=False)))
                if args.half_window_on_resample and args.strides[i + 1] > 1:
                    window *= 2
        self.decoder_blocks = nn.ModuleList(blocks)
        self.quantizer = Quantizer(args)
        self.output_proj = causal_conv(args.dim, args.patch_size, args.patch_kernel)

    def latents(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, T, 1 + acoustic_dim] frame codes (specials' offset included) -> [B, T, latent_dim]."""
        codes = (frames - AUDIO_SPECIALS).clamp(min=0)  # padding rows of a batch (zeros) decode as code 0
        semantic = self.quantizer.semantic_codebook(codes[..., 0])
        acoustic = codes[..., 1:].to(semantic.dtype) * 2 / (self.args.acoustic_levels - 1) - 1
        return torch.cat([semantic, acoustic], dim=-1)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, T, K] codes -> [B, T * samples_per_frame] samples."""
        x = self.latents(frames)
        for block in self.decoder_blocks:
            if isinstance(block, CodecTransformer):
                x = block(x)
            else:
                x = block(x.transpose(1, 2)).transpose(1, 2)
        patches = self.output_proj(x.transpose(1, 2))  # [B, patch, T']
        return patches.transpose(1, 2).reshape(frames.shape[0], -1)

    def stream(self, frames: torch.Tensor, states: Sequence[StreamState], counts: Sequence[int]) -> torch.Tensor:
        """[B, L, K] codes of each row's next counts[i] frames (right-padded to L) to their samples [B, L *
        samples_per_frame] (row i's first counts[i] * samples_per_frame valid), equal to those samples of decoding all
        the row's frames at once; states[i] advances past them."""
        carry = CausalStream([state.carry for state in states], counts)
        x = self.latents(frames)
        for block in self.decoder_blocks:
            if isinstance(block, CodecTransformer):
                per_frame = x.shape[1] // carry.longest  # this stage's positions per frame
                x = block.stream(x, carry, [state.frames * per_frame for state in states])
            else:
                x = carry.run(block, x.transpose(1, 2)).transpose(1, 2)
        patches = carry.run(self.output_proj, x.transpose(1, 2))
        for state, count in zip(states, counts, strict=True):
            state.frames += count
        return patches.transpose(1, 2).reshape(frames.shape[0], -1)


class AudioTokenizerEncoder(nn.Module):
    """`audio_tokenizer.input_proj` and `.encoder_blocks`: 24 kHz audio -> the 292-d latent per frame, in the layout the
    decoder mirrors (240-sample patches, transformer stages with windows halving at each stride-2 conv). Absent from the
    open release; loaded only when a checkpoint has it."""

    def __init__(self, args: CodecArgs) -> None:
        super().__init__()
        self.args = args
        self.input_proj = causal_conv(args.patch_size, args.dim, args.patch_kernel)
        window, blocks = args.window, []
        for i, layers in enumerate(args.encoder_lengths):
            blocks.append(CodecTransformer(args, layers, window))
            last = i + 1 == len(args.encoder_lengths)
            if args.encoder_kernels[i] != 1 or args.encoder_strides[i] != 1 or last:
                blocks.append(causal_conv(args.dim, args.latent_dim if last else args.dim, args.encoder_kernels[i],
                                          args.encoder_strides[i], pad_mode="replicate"))
                if args.half_window_on_resample and args.encoder_strides[i] > 1:
                    window //= 2
        self.encoder_blocks = nn.ModuleList(blocks)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        """[B, S] samples (S a multiple of the patch) -> [B, T, latent_dim]."""
        x = samples.view(samples.shape[0], -1, self.args.patch_size).transpose(1, 2)  # [B, patch, T]
        x = self.input_proj(x).transpose(1, 2)
        for block in self.encoder_blocks:
            x = block(x) if isinstance(block, CodecTransformer) else block(x.transpose(1, 2)).transpose(1, 2)
        return x

    def codes(self, samples: torch.Tensor, quantizer: Quantizer) -> torch.Tensor:
        """[S] samples -> [T + 1, 1 + acoustic_dim] codes (specials' offset included), ending with the [END_AUDIO] frame
        that follows a reference clip in the prompt."""
        pad = -len(samples) % self.args.patch_size
        latent = self(F.pad(samples, (0, pad))[None])[0]
        semantic = quantizer.semantic_codebook.nearest(latent[:, : self.args.semantic_dim])
        scaled = (torch.tanh(latent[:, self.args.semantic_dim :]) + 1) / 2 * (self.args.acoustic_levels - 1)
        codes = torch.cat([semantic[:, None], scaled.round().long()], dim=1) + AUDIO_SPECIALS
        end = torch.zeros(1, codes.shape[1], dtype=codes.dtype, device=codes.device)
        end[0, 0] = END_AUDIO
        return torch.cat([codes, end])
