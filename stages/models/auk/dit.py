"""AuK's velocity network: a rectified-flow MMDiT over the VAE latents, conditioned on the fused thinker states.

Joint (double-stream) blocks keep the audio and text streams apart and attend jointly; single-stream blocks then
run over [text, audio]. Timestep conditioning is adaLN. Rotary embeddings are the interleaved kind (pairs of
adjacent channels), one position axis per stream in the joint blocks and one over the concatenation after.
Attribute names are the checkpoint's tensor names under `transformer.`.

Every call takes a padded batch with per-row lengths: rows are independent (keys past a row's length are masked,
positions follow each row's real lengths), so a request's velocity does not depend on its batch mates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.flow_dit import (
    AdaLayerNormZero,
    AdaLayerNormZeroFinal,
    ConvPositionEmbedding,
    RotaryEmbedding,
    TimestepEmbedding,
    interleaved_rotary,
)
from vocalis.stages.models.auk.config import DiTConfig


def modulated(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], eps=1e-6) * (1 + scale[:, None]) + shift[:, None]


class FeedForward(nn.Module):
    """SwiGLU: linear_out(silu(a) * b) with [a, b] = linear_in(x)."""

    def __init__(self, dim: int, mult: float) -> None:
        super().__init__()
        inner = int(dim * mult)
        self.linear_in = nn.Linear(dim, inner * 2, bias=False)
        self.linear_out = nn.Linear(inner, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.linear_in(x).chunk(2, dim=-1)
        return self.linear_out(F.silu(a) * b)


class JointAttention(nn.Module):
    """q/k/v in one projection, RMS q/k-norm per head; with `context_dim`, a second stream attended jointly."""

    def __init__(self, dim: int, heads: int, dim_head: int, context_dim: int | None = None) -> None:
        super().__init__()
        self.heads, self.dim_head = heads, dim_head
        inner = heads * dim_head
        self.to_qkv = nn.Linear(dim, 3 * inner)
        self.q_norm = nn.RMSNorm(dim_head)
        self.k_norm = nn.RMSNorm(dim_head)
        if context_dim is not None:
            self.to_qkv_c = nn.Linear(context_dim, 3 * inner)
            self.c_q_norm = nn.RMSNorm(dim_head)
            self.c_k_norm = nn.RMSNorm(dim_head)
            self.to_out_c = nn.Linear(inner, context_dim)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim)])

    def _heads(self, x: torch.Tensor, proj: nn.Linear, q_norm: nn.Module, k_norm: nn.Module, angles: torch.Tensor):
        q, k, v = (t.unflatten(-1, (self.heads, self.dim_head)).transpose(1, 2) for t in proj(x).chunk(3, dim=-1))
        angles = angles[:, None]  # [B, 1, L, D]: the floor's interleaved rotary, per head
        q, k = (interleaved_rotary(norm(t), angles).to(t.dtype) for norm, t in ((q_norm, q), (k_norm, k)))
        return q, k, v

    def single(self, x: torch.Tensor, angles: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        q, k, v = self._heads(x, self.to_qkv, self.q_norm, self.k_norm, angles)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).transpose(1, 2).flatten(2)
        return self.to_out[0](out)

    def joint(self, x: torch.Tensor, c: torch.Tensor, angles: torch.Tensor, c_angles: torch.Tensor, bias: torch.Tensor | None):
        q, k, v = self._heads(x, self.to_qkv, self.q_norm, self.k_norm, angles)
        cq, ck, cv = self._heads(c, self.to_qkv_c, self.c_q_norm, self.c_k_norm, c_angles)
        out = F.scaled_dot_product_attention(torch.cat([q, cq], 2), torch.cat([k, ck], 2), torch.cat([v, cv], 2), attn_mask=bias)
        out = out.transpose(1, 2).flatten(2)
        return self.to_out[0](out[:, : x.shape[1]]), self.to_out_c(out[:, x.shape[1]:])


class MMDiTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int, ff_mult: float) -> None:
        super().__init__()
        self.attn_norm_c = AdaLayerNormZero(dim)
        self.attn_norm_x = AdaLayerNormZero(dim)
        self.attn = JointAttention(dim, heads, dim_head, context_dim=dim)
        self.ff_c = FeedForward(dim, ff_mult)
        self.ff_x = FeedForward(dim, ff_mult)

    def forward(self, x, c, t, x_mask, c_mask, angles, c_angles, bias):
        norm_c, c_gate, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.attn_norm_c(c, t)
        norm_x, x_gate, x_shift_mlp, x_scale_mlp, x_gate_mlp = self.attn_norm_x(x, t)
        x_attn, c_attn = self.attn.joint(norm_x, norm_c, angles, c_angles, bias)
        x_attn = x_attn.masked_fill(~x_mask[..., None], 0.0)
        c_attn = c_attn.masked_fill(~c_mask[..., None], 0.0)
        c = c + c_gate[:, None] * c_attn
        c = c + c_gate_mlp[:, None] * self.ff_c(modulated(c, c_shift_mlp, c_scale_mlp))
        x = x + x_gate[:, None] * x_attn
        x = x + x_gate_mlp[:, None] * self.ff_x(modulated(x, x_shift_mlp, x_scale_mlp))
        return x, c


class DiTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int, ff_mult: float) -> None:
        super().__init__()
        self.attn_norm = AdaLayerNormZero(dim)
        self.attn = JointAttention(dim, heads, dim_head)
        self.ff = FeedForward(dim, ff_mult)

    def forward(self, x, t, mask, angles, bias):
        norm, gate, shift_mlp, scale_mlp, gate_mlp = self.attn_norm(x, t)
        x = x + gate[:, None] * self.attn.single(norm, angles, bias).masked_fill(~mask[..., None], 0.0)
        return x + gate_mlp[:, None] * self.ff(modulated(x, shift_mlp, scale_mlp))


class AudioEmbedding(nn.Module):
    def __init__(self, latent_dim: int, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(latent_dim, dim)
        self.conv_pos_embed = ConvPositionEmbedding(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return self.conv_pos_embed(x, mask) + x


@dataclass
class DiTBatch:
    """One padded batch of rows: noisy target latents, reference latents, text condition, and their lengths."""

    x: torch.Tensor
    """[B, N, latent] noisy target latents (padded to the longest target)."""
    ref: torch.Tensor
    """[B, R, latent] reference latents (zeros where a row has none or drops them)."""
    text: torch.Tensor
    """[B, T, dim] projected text condition (zeros for an unconditional row)."""
    time: torch.Tensor
    """[B] flow time of each row."""
    x_len: torch.Tensor
    ref_len: torch.Tensor
    text_len: torch.Tensor


def _lengths_mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    return torch.arange(size, device=lengths.device)[None] < lengths[:, None]


def _bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))[:, None, None]


class AuKDiT(nn.Module):
    def __init__(self, config: DiTConfig, latent_dim: int) -> None:
        super().__init__()
        self.config = config
        dim = config.dim
        self.latent_dim = latent_dim
        self.time_embed = TimestepEmbedding(dim)
        self.txt_norm = nn.RMSNorm(dim)
        self.txt_proj = nn.Linear(config.text_hidden_dim, dim)
        self.audio_embed = AudioEmbedding(latent_dim, dim)
        self.rotary_embed = RotaryEmbedding(config.dim_head)
        self.transformer_blocks = nn.ModuleList(
            MMDiTBlock(dim, config.heads, config.dim_head, config.ff_mult) for _ in range(config.num_layers)
        )
        self.single_transformer_blocks = nn.ModuleList(
            DiTBlock(dim, config.heads, config.dim_head, config.ff_mult) for _ in range(config.num_single_layers)
        )
        self.norm_out = AdaLayerNormZeroFinal(dim)
        self.proj_out = nn.Linear(dim, latent_dim)

    def project_text(self, text: torch.Tensor) -> torch.Tensor:
        """The thinker condition [B, T, text_hidden_dim] in the DiT's width (constant over a trajectory)."""
        return self.txt_norm(self.txt_proj(text))

    def forward(self, batch: DiTBatch) -> torch.Tensor:
        """The velocity [B, N, latent] at each row's target frames."""
        x, ref, c = batch.x, batch.ref, batch.text
        b, n, r, tl = x.shape[0], x.shape[1], ref.shape[1], c.shape[1]
        x_mask, ref_mask, c_mask = _lengths_mask(batch.x_len, n), _lengths_mask(batch.ref_len, r), _lengths_mask(batch.text_len, tl)
        t = self.time_embed(batch.time)
        audio = torch.cat([self.audio_embed(ref, ref_mask), self.audio_embed(x, x_mask)], dim=1) if r else self.audio_embed(x, x_mask)
        audio_mask = torch.cat([ref_mask, x_mask], dim=1) if r else x_mask
        # Positions follow each row's real lengths: its target frames start right after its reference.
        target_pos = torch.arange(n, device=x.device)[None] + batch.ref_len[:, None]
        ref_pos = torch.arange(r, device=x.device)[None].expand(b, -1)
        audio_pos = torch.cat([ref_pos, target_pos], dim=1)
        text_pos = torch.arange(tl, device=x.device)[None].expand(b, -1)
        angles, c_angles = self.rotary_embed.angles(audio_pos), self.rotary_embed.angles(text_pos)
        use_bias = self.config.attn_mask_enabled
        joint_bias = _bias(torch.cat([audio_mask, c_mask], dim=1), audio.dtype) if use_bias else None
        single_mask = torch.cat([c_mask, audio_mask], dim=1)
        single_bias = _bias(single_mask, audio.dtype) if use_bias else None
        for block in self.transformer_blocks:
            audio, c = block(audio, c, t, audio_mask, c_mask, angles, c_angles, joint_bias)
        h = torch.cat([c, audio], dim=1)
        single_angles = self.rotary_embed.angles(torch.cat([text_pos, audio_pos + batch.text_len[:, None]], dim=1))
        for block in self.single_transformer_blocks:
            h = block(h, t, single_mask, single_angles, single_bias)
        return self.proj_out(self.norm_out(h[:, tl + r:], t))
