"""The VoxCPM2 network: base LM, FSQ, residual LM, LocEnc, LocDiT flow matching and the stop head.

One generation step, for every running sequence at once:
  lm_hidden       = FSQ(base_lm(previous input))           (text positions of a prompt skip the FSQ)
  residual_hidden = residual_lm(fusion_concat_proj([lm_hidden, previous patch embedding]))
  patch           = LocDiT flow matching, conditioned on [lm_to_dit(lm_hidden), res_to_dit(residual_hidden)]
                    and on the previous patch, from Gaussian noise, with classifier-free guidance
  stop            = stop_head(silu(stop_proj(lm_hidden)))  (decided beside the patch, which is still kept)
  next input      = enc_to_lm_proj(LocEnc(patch))
Attribute names are the checkpoint's (`base_lm.*`, `feat_decoder.estimator.*`, `fsq_layer.*`, ...).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.minicpm import MiniCPMStack
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache

CFG_ZERO_INIT_FRACTION = 0.04
"""Leading fraction of solver steps whose velocity is zero (CFG-Zero*, at least one step), as the reference."""
SWAY_SAMPLING = 1.0
"""Sway-sampling coefficient of the timestep schedule, as the reference."""


class ScalarQuantizer(nn.Module):
    """FSQ bottleneck: project down, tanh, round to 1/scale steps, project back up."""

    def __init__(self, dim: int, latent_dim: int, scale: int) -> None:
        super().__init__()
        self.scale = scale
        self.in_proj = nn.Linear(dim, latent_dim)
        self.out_proj = nn.Linear(latent_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.in_proj(x))
        return self.out_proj(torch.round(h * self.scale) / self.scale)


class LocalEncoder(nn.Module):
    """LocEnc: a patch [P, D] to one vector, the output at a learned leading token of a bidirectional stack."""

    def __init__(self, config: VoxCPM2Config) -> None:
        super().__init__()
        stack = config.local_encoder
        self.special_token = nn.Parameter(torch.zeros(1, 1, 1, stack.hidden_size))
        self.in_proj = nn.Linear(config.feat_dim, stack.hidden_size)
        self.encoder = MiniCPMStack(stack)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        """[N, P, D] -> [N, H_enc]."""
        x = self.in_proj(patches)
        x = torch.cat([self.special_token[0].expand(x.shape[0], 1, -1), x], dim=1)
        return self.encoder.dense(x)[:, 0]


class TimestepEmbedding(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(dim, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


def sinusoidal(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """[N] timesteps to [N, dim] (sin half, then cos half)."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=t.dtype, device=t.device) * -(math.log(10000) / (half - 1)))
    angles = scale * t[:, None] * freqs[None, :]
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


class LocalDiT(nn.Module):
    """The velocity estimator: [condition tokens (2), time token, previous patch, noisy patch], bidirectional."""

    def __init__(self, config: VoxCPM2Config) -> None:
        super().__init__()
        stack = config.local_dit
        self.hidden_size = stack.hidden_size
        self.in_proj = nn.Linear(config.feat_dim, stack.hidden_size)
        self.cond_proj = nn.Linear(config.feat_dim, stack.hidden_size)
        self.out_proj = nn.Linear(stack.hidden_size, config.feat_dim)
        self.time_mlp = TimestepEmbedding(stack.hidden_size)
        self.delta_time_mlp = TimestepEmbedding(stack.hidden_size)
        self.decoder = MiniCPMStack(stack)

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, cond: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        """x [N, D, P] noisy patch, mu [N, 2*H], t/dt [N], cond [N, D, P'] previous patch -> velocity [N, D, P]."""
        x = self.in_proj(x.transpose(1, 2))
        cond = self.cond_proj(cond.transpose(1, 2))
        time = self.time_mlp(sinusoidal(t, self.hidden_size).to(x.dtype))
        time = time + self.delta_time_mlp(sinusoidal(dt, self.hidden_size).to(x.dtype))
        mu = mu.view(x.shape[0], -1, x.shape[-1])
        hidden = self.decoder.dense(torch.cat([mu, time[:, None], cond, x], dim=1))
        hidden = hidden[:, mu.shape[1] + 1 + cond.shape[1] :]
        return self.out_proj(hidden).transpose(1, 2)


class FlowMatching(nn.Module):
    """Conditional flow matching decode of one patch: Euler steps from noise, classifier-free guidance
    against an unconditional pass (zero condition), with the CFG-Zero* optimized scale."""

    def __init__(self, config: VoxCPM2Config) -> None:
        super().__init__()
        self.estimator = LocalDiT(config)
        self.mean_mode = config.dit_mean_mode

    def sample(self, mu: torch.Tensor, cond: torch.Tensor, noise: torch.Tensor, steps: int, cfg: torch.Tensor) -> torch.Tensor:
        """mu [B, 2H], cond [B, D, P'], noise [B, D, P], cfg [B] -> patch latents [B, D, P]."""
        dtype = mu.dtype
        t_span = torch.linspace(1, 0, steps + 1, device=mu.device, dtype=dtype)
        t_span = t_span + SWAY_SAMPLING * (torch.cos(torch.pi / 2 * t_span) - 1 + t_span)
        x = noise.to(dtype)
        b = x.shape[0]
        t, dt = t_span[0], t_span[0] - t_span[1]
        zero_init_steps = max(1, int(len(t_span) * CFG_ZERO_INIT_FRACTION))
        mu_in = torch.cat([mu, torch.zeros_like(mu)])
        cond_in = torch.cat([cond, cond]).to(dtype)
        guidance = cfg.to(dtype).view(b, 1, 1)
        for step in range(1, len(t_span)):
            if step <= zero_init_steps:
                velocity = torch.zeros_like(x)
            else:
                t_in = t.expand(2 * b)
                dt_in = dt.expand(2 * b) if self.mean_mode else torch.zeros(2 * b, device=x.device, dtype=dtype)
                out = self.estimator(torch.cat([x, x]), mu_in, t_in, cond_in, dt_in)
                positive, negative = out[:b], out[b:]
                dot = torch.sum(positive.reshape(b, -1) * negative.reshape(b, -1), dim=1, keepdim=True)
                norm = torch.sum(negative.reshape(b, -1) ** 2, dim=1, keepdim=True) + 1e-8
                scale = (dot / norm).view(b, 1, 1)
                velocity = negative * scale + guidance * (positive - negative * scale)
            x = x - dt * velocity
            t = t - dt
            if step < len(t_span) - 1:
                dt = t - t_span[step + 1]
        return x


class VoxCPM2(nn.Module):
    """Every trainable part of model.safetensors, under the checkpoint's names."""

    def __init__(self, config: VoxCPM2Config) -> None:
        super().__init__()
        self.config = config
        lm = config.base_lm
        h, dit = lm.hidden_size, config.dit.hidden_dim
        self.base_lm = MiniCPMStack(lm)
        self.residual_lm = MiniCPMStack(config.residual_lm)
        self.feat_encoder = LocalEncoder(config)
        self.feat_decoder = FlowMatching(config)
        self.fsq_layer = ScalarQuantizer(h, config.scalar_quantization_latent_dim, config.scalar_quantization_scale)
        self.enc_to_lm_proj = nn.Linear(config.encoder.hidden_dim, h)
        self.lm_to_dit_proj = nn.Linear(h, dit)
        self.res_to_dit_proj = nn.Linear(h, dit)
        self.fusion_concat_proj = nn.Linear(2 * h, h)
        self.stop_proj = nn.Linear(h, h)
        self.stop_head = nn.Linear(h, 2, bias=False)

    @property
    def hidden_size(self) -> int:
        return self.config.lm.hidden_size

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.base_lm.embed_tokens(ids) * self.config.base_lm.embedding_scale

    def embed_patches(self, patches: torch.Tensor) -> torch.Tensor:
        """Patches [N, P, D] as LM inputs [N, H]."""
        return self.enc_to_lm_proj(self.feat_encoder(patches))

    def step(
        self, inputs: torch.Tensor, patch_embeds: torch.Tensor, is_audio: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both LMs over flattened step tokens: inputs [T, H] to the base LM, patch_embeds [T, H] (zero at
        text positions), is_audio [T] -> (lm_hidden, residual_hidden), each [T, H]."""
        out = self.base_lm.cached(inputs, batch, cache, first_layer=0)
        lm_hidden = torch.where(is_audio[:, None], self.fsq_layer(out), out)
        residual_in = self.fusion_concat_proj(torch.cat([lm_hidden, patch_embeds], dim=-1))
        residual = self.residual_lm.cached(residual_in, batch, cache, first_layer=self.config.lm.num_hidden_layers)
        return lm_hidden, residual

    def stop_logits(self, lm_hidden: torch.Tensor) -> torch.Tensor:
        return self.stop_head(F.silu(self.stop_proj(lm_hidden)))

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.lm_to_dit_proj(lm_hidden), self.res_to_dit_proj(residual_hidden)], dim=-1)
