"""Gated DeltaNet, the linear-attention token mixer of Qwen3.5's hybrid layers (three in four of them).

Attribute names are the published checkpoints' (`linear_attn.in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`,
`conv1d`, `dt_bias`, `A_log`, `norm`, `out_proj`). Per token: q, k, v from one projection through a short depthwise
causal convolution (SiLU); per value head a decay exp(-exp(A_log) * softplus(a + dt_bias)) and a write strength
beta = sigmoid(b); the gated delta rule (stages/runtime/linear_attention.py) over L2-normalised q and k; then an RMSNorm of
each head's output gated by SiLU(z), and `out_proj`.

Two backends, as QKVAttention has: `cached` (a step's flattened tokens, continuing each sequence's state in the
runtime's RecurrentStates) and `dense` (whole rows [B, L, hidden] from a zero state).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.runtime.block_manager import StateShape
from vocalis.stages.runtime.linear_attention import (
    RecurrentBatch,
    RecurrentStates,
    cached_linear_attention,
    causal_conv,
    gated_delta_chunked,
    l2_normalize,
)


class GatedRMSNorm(nn.Module):
    """RMSNorm of x (float32 math, weight in x's dtype) times SiLU(gate) in float32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        xf = x.float()
        normed = self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype)
        return (normed * F.silu(gate.float())).to(dtype)


class GatedDeltaNet(nn.Module):
    def __init__(self, hidden: int, key_heads: int, value_heads: int, key_dim: int, value_dim: int, conv_kernel: int,
                 eps: float = 1e-6) -> None:
        super().__init__()
        if value_heads % key_heads:
            raise ValueError(f"linear_num_value_heads ({value_heads}) must be a multiple of linear_num_key_heads ({key_heads})")
        self.key_heads, self.value_heads, self.key_dim, self.value_dim = key_heads, value_heads, key_dim, value_dim
        self.conv_channels = 2 * key_heads * key_dim + value_heads * value_dim
        self.in_proj_qkv = nn.Linear(hidden, self.conv_channels, bias=False)
        self.in_proj_z = nn.Linear(hidden, value_heads * value_dim, bias=False)
        self.in_proj_b = nn.Linear(hidden, value_heads, bias=False)
        self.in_proj_a = nn.Linear(hidden, value_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_channels, self.conv_channels, conv_kernel, groups=self.conv_channels, bias=False,
                                padding=conv_kernel - 1)
        self.dt_bias = nn.Parameter(torch.ones(value_heads))
        self.A_log = nn.Parameter(torch.zeros(value_heads))
        self.norm = GatedRMSNorm(value_dim, eps)
        self.out_proj = nn.Linear(value_heads * value_dim, hidden, bias=False)

    def state_shape(self, num_layers: int) -> StateShape:
        """The per-sequence state of `num_layers` layers like this one."""
        return StateShape(num_layers, self.conv_channels, self.conv1d.kernel_size[0] - 1, self.value_heads, self.key_dim,
                          self.value_dim)

    def _mix(self, x: torch.Tensor, conv_state: torch.Tensor, lengths: torch.Tensor | None, valid: torch.Tensor | None):
        """Rows x [B, L, hidden] -> q, k [B, L, Hv, Dk], v [B, L, Hv, Dv] (float32, q scaled), log_decay, beta
        [B, L, Hv] (zero at padding), z [B, L, Hv, Dv] and the new conv state."""
        b, length, _ = x.shape
        mixed, new_conv = causal_conv(self.in_proj_qkv(x).transpose(1, 2), self.conv1d.weight[:, 0], conv_state, lengths)
        q, k, v = mixed.transpose(1, 2).split([self.key_heads * self.key_dim] * 2 + [self.value_heads * self.value_dim], dim=-1)
        repeat = self.value_heads // self.key_heads
        q = l2_normalize(q.reshape(b, length, self.key_heads, self.key_dim).float()).repeat_interleave(repeat, dim=2)
        k = l2_normalize(k.reshape(b, length, self.key_heads, self.key_dim).float()).repeat_interleave(repeat, dim=2)
        q = q * self.key_dim**-0.5
        v = v.reshape(b, length, self.value_heads, self.value_dim).float()
        beta = torch.sigmoid(self.in_proj_b(x)).float()
        log_decay = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        if valid is not None:
            beta, log_decay = beta * valid[..., None], log_decay * valid[..., None]
        z = self.in_proj_z(x).view(b, length, self.value_heads, self.value_dim)
        return q, k, v, log_decay, beta, z, new_conv

    def _out(self, out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """out_proj of the gated, normed per-head outputs out [..., Hv, Dv]."""
        gated = self.norm(out.to(z.dtype), z)
        return self.out_proj(gated.flatten(-2))

    def cached(self, x: torch.Tensor, states: RecurrentStates, layer: int, batch: RecurrentBatch) -> torch.Tensor:
        """A step's flattened tokens x [T, hidden], each continuing its sequence's state at `layer` (updated in place)."""
        rows = batch.rows(x)
        conv_state = states.conv[layer].index_select(0, batch.slots)
        q, k, v, log_decay, beta, z, new_conv = self._mix(rows, conv_state, batch.lengths, batch.valid)
        states.conv[layer].index_copy_(0, batch.slots, new_conv.to(states.conv.dtype))
        out = cached_linear_attention(q, k, v, log_decay, beta, states, layer, batch)
        return self._out(batch.flatten(out), batch.flatten(z))

    def dense(self, x: torch.Tensor) -> torch.Tensor:
        """Whole rows x [B, L, hidden], each from a zero state."""
        b = x.shape[0]
        conv_state = x.new_zeros(b, self.conv_channels, self.conv1d.kernel_size[0] - 1)
        q, k, v, log_decay, beta, z, _ = self._mix(x, conv_state, None, None)
        initial = torch.zeros(b, self.value_heads, self.key_dim, self.value_dim, device=x.device)
        out, _ = gated_delta_chunked(*(t.transpose(1, 2) for t in (q, k, v, log_decay, beta)), initial)
        return self._out(out.transpose(1, 2), z)
