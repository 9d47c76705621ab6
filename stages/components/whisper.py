"""Whisper's encoder layer (pre-norm attention with an unbiased k_proj, then a GELU MLP), named as transformers
spells it (`self_attn.{q,k,v,out}_proj`, `self_attn_layer_norm`, `fc1`, `fc2`, `final_layer_norm`): Qwen2.5-Omni's
audio tower (AuK) and GLM-TTS's WhisperVQ speech tokenizer are built from it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class WhisperEncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, ffn_dim: int) -> None:
        super().__init__()
        self.heads = heads
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(dim, dim)
        self.self_attn.k_proj = nn.Linear(dim, dim, bias=False)
        self.self_attn.v_proj = nn.Linear(dim, dim)
        self.self_attn.out_proj = nn.Linear(dim, dim)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x [B, L, dim]; mask (bool, True = attend) broadcastable to [B, heads, L, L], or None."""
        h = self.self_attn_layer_norm(x)
        attn = self.self_attn
        q, k, v = (p(h).unflatten(-1, (self.heads, -1)).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).flatten(2)
        x = x + attn.out_proj(out)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))
