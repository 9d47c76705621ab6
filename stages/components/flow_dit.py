"""The DiT velocity estimator of CosyVoice3-style flow matching (F5-TTS's DiT with a causal conv position embedding and
a chunk-causal attention mask), named as the checkpoints' `decoder.estimator.*` tensors.

Written once for every family whose flow decoder is this DiT (CosyVoice3, GLM-TTS). Quirks kept on purpose, as the
published models were trained with them: rotary embedding on the first `dim_head` channels of the projected queries
and keys only (x-transformers' partial rotary applied before the heads are split, i.e. to the first head), with
interleaved pairs; attention where a frame sees every frame up to the end of its `static_chunk_size` chunk.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def chunk_causal_mask(length: int, chunk: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[length, length] bool: frame i sees frame j when j lies in i's chunk or an earlier one (chunk <= 0: all)."""
    if chunk <= 0:
        return torch.ones(length, length, dtype=torch.bool, device=device)
    position = torch.arange(length, device=device)
    ends = (position // chunk + 1) * chunk
    return position[None, :] < ends[:, None]


class SinusPositionEmbedding(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor, scale: float = 1000.0) -> torch.Tensor:
        half = self.dim // 2
        freq = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10000) / (half - 1)))
        angles = scale * t.float()[:, None] * freq[None]
        return torch.cat([angles.sin(), angles.cos()], dim=-1).to(t.dtype)


class TimestepEmbedding(nn.Module):
    """`time_mlp.0`, `time_mlp.2`: sinusoidal features of t through Linear, SiLU, Linear."""

    def __init__(self, dim: int, freq_embed_dim: int = 256) -> None:
        super().__init__()
        self.time_embed = SinusPositionEmbedding(freq_embed_dim)
        self.time_mlp = nn.Sequential(nn.Linear(freq_embed_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.time_mlp(self.time_embed(t).to(self.time_mlp[0].weight.dtype))  # flow times may stay float32


class CausalConvPositionEmbedding(nn.Module):
    """Two grouped causal convolutions with Mish (`conv1.0`, `conv2.0`)."""

    def __init__(self, dim: int, kernel_size: int = 31, groups: int = 16) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.conv1 = nn.Sequential(nn.Conv1d(dim, dim, kernel_size, groups=groups), nn.Mish())
        self.conv2 = nn.Sequential(nn.Conv1d(dim, dim, kernel_size, groups=groups), nn.Mish())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.kernel_size - 1
        x = self.conv1(F.pad(x.transpose(1, 2), (pad, 0)))
        return self.conv2(F.pad(x, (pad, 0))).transpose(1, 2)


class ConvPositionEmbedding(nn.Module):
    """F5-TTS's centred position convolution (GLM-TTS's and AuK's DiTs), `conv1d.0`, `conv1d.2`: two grouped
    convolutions (kernel 31) with Mish over [B, L, C]. With `mask` [B, L] (False: a row's padding), the padding is
    zeroed before and after each convolution, so a row's frames do not depend on its batch mates' lengths."""

    def __init__(self, dim: int, kernel_size: int = 31, groups: int = 16) -> None:
        super().__init__()
        self.conv1d = nn.Sequential(
            nn.Conv1d(dim, dim, kernel_size, groups=groups, padding=kernel_size // 2),
            nn.Mish(),
            nn.Conv1d(dim, dim, kernel_size, groups=groups, padding=kernel_size // 2),
            nn.Mish(),
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is None:
            return self.conv1d(x.transpose(1, 2)).transpose(1, 2)
        keep = mask[:, None]
        h = x.transpose(1, 2).masked_fill(~keep, 0.0)
        for i, layer in enumerate(self.conv1d):
            h = layer(h)
            if i in (0, 2):
                h = h.masked_fill(~keep, 0.0)
        return h.transpose(1, 2)


class InputEmbedding(nn.Module):
    """proj([noisy mel, condition mel, token features, speaker]) plus its causal conv position embedding."""

    def __init__(self, mel_dim: int, mu_dim: int, dim: int, spk_dim: int) -> None:
        super().__init__()
        self.spk_dim = spk_dim
        self.proj = nn.Linear(mel_dim * 2 + mu_dim + spk_dim, dim)
        self.conv_pos_embed = CausalConvPositionEmbedding(dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, mu: torch.Tensor, spks: torch.Tensor) -> torch.Tensor:
        x = self.project(x, cond, mu, spks)
        return self.conv_pos_embed(x) + x

    def project(self, x: torch.Tensor, cond: torch.Tensor, mu: torch.Tensor, spks: torch.Tensor) -> torch.Tensor:
        """The projection alone, frame by frame (what the position embedding convolves)."""
        parts = [x, cond, mu]
        if self.spk_dim > 0:
            parts.append(spks[:, None, :].expand(-1, x.shape[1], -1))
        return self.proj(torch.cat(parts, dim=-1))


def interleaved_rotary(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotate the first freqs.shape[-1] channels of x [B, L, C] by freqs [L, R] (pairs (0,1), (2,3), ...)."""
    rot = freqs.shape[-1]
    head, rest = x[..., :rot], x[..., rot:]
    pairs = head.unflatten(-1, (-1, 2))
    rotated = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return torch.cat([head * freqs.cos() + rotated * freqs.sin(), rest], dim=-1)


class RotaryEmbedding(nn.Module):
    """x-transformers' rotary embedding: `inv_freq` is a persistent buffer, so checkpoints carry it."""

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, length: int) -> torch.Tensor:
        return self.angles(torch.arange(length, device=self.inv_freq.device, dtype=self.inv_freq.dtype))

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """[..., dim] angles for positions of any shape [...], each frequency twice, interleaved."""
        freqs = positions.to(self.inv_freq.dtype)[..., None] * self.inv_freq
        return torch.stack([freqs, freqs], dim=-1).flatten(-2)


class Attention(nn.Module):
    """`to_q`, `to_k`, `to_v`, `to_out.0`."""

    def __init__(self, dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        self.heads, self.dim_head = heads, dim_head
        inner = heads * dim_head
        self.to_q = nn.Linear(dim, inner)
        self.to_k = nn.Linear(dim, inner)
        self.to_v = nn.Linear(dim, inner)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(0.0))

    def forward(self, x: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.attend(x, freqs, mask)[0]

    def attend(self, x: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor | None,
               past: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Output [B, L, dim], and this call's keys and values [B, heads, L, dim_head]; `past` keys and values of
        earlier frames (mask [L, past + L]) are attended to, not returned."""
        b, length, _ = x.shape
        q = interleaved_rotary(self.to_q(x), freqs)
        k = interleaved_rotary(self.to_k(x), freqs)
        v = self.to_v(x)
        q, k, v = (t.view(b, length, self.heads, self.dim_head).transpose(1, 2) for t in (q, k, v))
        keys, values = (k, v) if past is None else (torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2))
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.to_out(out.transpose(1, 2).reshape(b, length, -1)), k, v


class AdaLayerNormZero(nn.Module):
    """`linear`: six modulations of the block from the time embedding (`emb_dim` wide when a speaker embedding is
    concatenated to it, as GLM-TTS's DiT does; `dim` otherwise)."""

    def __init__(self, dim: int, emb_dim: int | None = None) -> None:
        super().__init__()
        self.linear = nn.Linear(emb_dim or dim, dim * 6)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.linear(F.silu(emb)).chunk(6, dim=1)
        return self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None], gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormZeroFinal(nn.Module):
    def __init__(self, dim: int, emb_dim: int | None = None) -> None:
        super().__init__()
        self.linear = nn.Linear(emb_dim or dim, dim * 2)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        scale, shift = self.linear(F.silu(emb)).chunk(2, dim=1)
        return self.norm(x) * (1 + scale)[:, None] + shift[:, None]


class FeedForward(nn.Module):
    """`ff.0.0`, `ff.2`: Linear, tanh-GELU, Linear."""

    def __init__(self, dim: int, mult: float) -> None:
        super().__init__()
        inner = int(dim * mult)
        self.ff = nn.Sequential(nn.Sequential(nn.Linear(dim, inner), nn.GELU(approximate="tanh")), nn.Dropout(0.0), nn.Linear(inner, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ff(x)


class DiTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int, ff_mult: float, emb_dim: int | None = None) -> None:
        super().__init__()
        self.attn_norm = AdaLayerNormZero(dim, emb_dim)
        self.attn = Attention(dim, heads, dim_head)
        self.ff_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim, ff_mult)

    def forward(self, x: torch.Tensor, t: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.attend(x, t, freqs, mask)[0]

    def attend(self, x: torch.Tensor, t: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor | None,
               past: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The block's output, and its attention's keys and values of these frames (see `Attention.attend`)."""
        norm, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.attn_norm(x, t)
        attended, k, v = self.attn.attend(norm, freqs, mask, past)
        x = x + gate_msa[:, None] * attended
        norm = self.ff_norm(x) * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        return x + gate_mlp[:, None] * self.ff(norm), k, v


class DiT(nn.Module):
    """The velocity v(x, t | mu, spks, cond): [B, mel_dim, L] tensors in and out (channels first, as the solver holds them)."""

    def __init__(self, *, dim: int, depth: int, heads: int, dim_head: int, ff_mult: float = 4, mel_dim: int = 80,
                 mu_dim: int | None = None, spk_dim: int | None = None, static_chunk_size: int = 50,
                 long_skip_connection: bool = False, **_unused: object) -> None:
        super().__init__()
        self.time_embed = TimestepEmbedding(dim)
        self.input_embed = InputEmbedding(mel_dim, mu_dim or mel_dim, dim, spk_dim or 0)
        self.rotary_embed = RotaryEmbedding(dim_head)
        self.transformer_blocks = nn.ModuleList(DiTBlock(dim, heads, dim_head, ff_mult) for _ in range(depth))
        self.long_skip_connection = nn.Linear(dim * 2, dim, bias=False) if long_skip_connection else None
        self.norm_out = AdaLayerNormZeroFinal(dim)
        self.proj_out = nn.Linear(dim, mel_dim)
        self.static_chunk_size = static_chunk_size

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        x, mu, cond = x.transpose(1, 2), mu.transpose(1, 2), cond.transpose(1, 2)
        length = x.shape[1]
        t = self.time_embed(t)
        x = self.input_embed(x, cond, mu, spks)
        residual = x
        freqs = self.rotary_embed(length).to(x.dtype)
        mask = chunk_causal_mask(length, self.static_chunk_size, x.device)
        for block in self.transformer_blocks:
            x = block(x, t, freqs, mask)
        return self._out(x, residual, t)

    def forward_after(self, past: DiTPast, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, spks: torch.Tensor,
                      cond: torch.Tensor) -> tuple[torch.Tensor, DiTFrames]:
        """The velocity of frames [past.length, past.length + L) (tensors as `forward`'s), the frames before being
        whole attention chunks held in `past`: each frame sees all of them, so it equals `forward` over the whole
        sequence. Also what `past.append` needs to hold some of these frames for the next call."""
        if self.static_chunk_size <= 0 and past.length:
            raise ValueError("a DiT with full attention reads later frames: it cannot continue after held ones")
        x, mu, cond = x.transpose(1, 2), mu.transpose(1, 2), cond.transpose(1, 2)
        length, offset = x.shape[1], past.length
        t = self.time_embed(t)
        projected = self.input_embed.project(x, cond, mu, spks)
        context = projected if past.projected is None else torch.cat([past.projected, projected], dim=1)
        x = self.input_embed.conv_pos_embed(context)[:, -length:] + projected
        residual = x
        positions = torch.arange(offset, offset + length, device=x.device)
        freqs = self.rotary_embed.angles(positions).to(x.dtype)
        mask = torch.cat([torch.ones(length, offset, dtype=torch.bool, device=x.device),
                          chunk_causal_mask(length, self.static_chunk_size, x.device)], dim=1)
        keys, values = [], []
        for layer, block in enumerate(self.transformer_blocks):
            x, k, v = block.attend(x, t, freqs, mask, past.layer(layer))
            keys.append(k)
            values.append(v)
        return self._out(x, residual, t), DiTFrames(projected, keys, values)

    def _out(self, x: torch.Tensor, residual: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if self.long_skip_connection is not None:
            x = self.long_skip_connection(torch.cat([x, residual], dim=-1))
        return self.proj_out(self.norm_out(x, t)).transpose(1, 2)


@dataclass
class DiTFrames:
    """What `DiT.forward_after` computed for its frames that a later call reads: the input projection [B, L, dim]
    (the position embedding's convolutions read it) and every block's keys and values [B, heads, L, dim_head]."""

    projected: torch.Tensor
    keys: list[torch.Tensor]
    values: list[torch.Tensor]


class DiTPast:
    """The frames a DiT call continues after (one ODE step's, both guidance rows): every block's keys and values
    (grown in place, doubling), and the last input-projection frames the causal position embedding reads."""

    def __init__(self, kernel_size: int) -> None:
        self.tail = 2 * (kernel_size - 1)  # two causal convolutions in a row
        self.length = 0
        self.projected: torch.Tensor | None = None
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []

    @property
    def nbytes(self) -> int:
        """Bytes allocated for the keys and values."""
        return sum(buffer.numel() * buffer.element_size() for buffer in (*self._keys, *self._values))

    def copy(self) -> DiTPast:
        """A past holding the same frames in buffers of its own, allocated to their length."""
        copied = copy.copy(self)  # the projected tail is replaced on append, never written in place: shared
        copied._keys = [keys[:, :, : self.length].clone() for keys in self._keys]
        copied._values = [values[:, :, : self.length].clone() for values in self._values]
        return copied

    def layer(self, index: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        if not self.length:
            return None
        return self._keys[index][:, :, : self.length], self._values[index][:, :, : self.length]

    def append(self, frames: DiTFrames, count: int) -> None:
        """Hold the first `count` of `frames` (their attention chunks complete and final)."""
        if count <= 0:
            return
        end = self.length + count
        for held, new in ((self._keys, frames.keys), (self._values, frames.values)):
            for index, tensor in enumerate(new):
                if index == len(held):
                    held.append(tensor.new_empty((*tensor.shape[:2], max(end, 64), tensor.shape[3])))
                elif held[index].shape[2] < end:
                    grown = tensor.new_empty((*tensor.shape[:2], max(end, 2 * held[index].shape[2]), tensor.shape[3]))
                    grown[:, :, : self.length] = held[index][:, :, : self.length]
                    held[index] = grown
                held[index][:, :, self.length : end] = tensor[:, :, :count]
        projected = frames.projected[:, :count]
        joined = projected if self.projected is None else torch.cat([self.projected, projected], dim=1)
        self.projected = joined[:, -self.tail :]
        self.length = end
