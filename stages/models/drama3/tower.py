"""Drama 3's codebook-MTP decoder ("the tower"): from the backbone's final-normed hidden state at a position and the
frame that position predicts, the codes 1..K-1 of that frame, one per layer.

Read from the published config (no CPU oracle exists: the reference server's tower runs on its CUDA kernels): 4
shared enrichment layers then one layer per predicted codebook, 13 in all for 10 codebooks. Each layer first mixes
a code embedding into the hidden state (`eh_proj` of [enorm(embedding), hnorm(hidden)]; the embedding is zeroed when
the frame's main token is not semantic), then runs a pre-norm block: gated attention with per-head zero-centred
q/k norms and partial RoPE, a SiLU MLP, and a final norm. The shared layers take code 0 (the main token's offset in
the semantic band), the first of them also the summed codebook embeddings of the *input* frame's codes the backbone
did not see; residual layer j takes code j and its head predicts code j+1.

Every layer attends causally over the whole sequence at the backbone's positions, so each sequence keeps its own
keys and values per tower layer (`TowerKV`): a prompt's rows fill it during prefill (row p with frame p+1, which
the prompt holds), and each decode step adds the row whose frame it samples. The checkpoint's attention uses
pairwise-interleaved RoPE; the loader permutes the q/k rows (and q/k-norm weights) into the half-split layout, which
gives the same scores, so the floor's `QKVAttention` and `apply_rotary` run it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.attention import QKVAttention
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import rope
from vocalis.stages.models.drama3.config import CodebookDecoderConfig


class TowerKV:
    """One sequence's keys and values in every tower layer: [layers, kv_heads, capacity, head_dim], grown by doubling.
    Positions 0..length-1 are filled; a step writes positions start.. of every layer, then `length` moves."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device | str,
                 capacity: int = 64) -> None:
        self.keys = torch.zeros(layers, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        self.length = 0

    @property
    def bytes(self) -> int:
        return 2 * self.keys.numel() * self.keys.element_size()

    def truncate(self, length: int) -> None:
        """Forget positions from `length` on (a prefill that restarts there, e.g. after a preemption)."""
        self.length = min(self.length, length)

    def reserve(self, end: int) -> None:
        capacity = self.keys.shape[2]
        if end <= capacity:
            return
        while capacity < end:
            capacity *= 2
        grow = (0, 0, 0, capacity - self.keys.shape[2])
        self.keys, self.values = F.pad(self.keys, grow), F.pad(self.values, grow)

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k/v [kv_heads, n, D] at positions start.. of `layer`; the keys/values of positions 0..start+n-1."""
        end = start + k.shape[1]
        self.keys[layer, :, start:end] = k
        self.values[layer, :, start:end] = v
        return self.keys[layer, :, :end], self.values[layer, :, :end]


@dataclass(frozen=True)
class RowGroup:
    """Consecutive rows of a tower call that belong to one sequence: `count` rows at positions start.."""

    kv: TowerKV
    start: int
    count: int


def zero_centred(dim: int, eps: float) -> RMSNorm:
    return RMSNorm(dim, eps, weight_offset=1.0)


class TowerLayer(nn.Module):
    def __init__(self, c: CodebookDecoderConfig) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(c.vocab_size, c.dim)
        self.enorm = zero_centred(c.dim, c.norm_eps)
        self.hnorm = zero_centred(c.dim, c.norm_eps)
        self.eh_proj = nn.Linear(2 * c.dim, c.dim, bias=False)
        self.input_layernorm = zero_centred(c.dim, c.norm_eps)
        self.self_attn = QKVAttention(c.dim, c.n_head, c.n_local_heads, c.head_dim, qk_norm_eps=c.norm_eps, output_gate=True,
                                      norm_weight_offset=1.0)
        self.post_attention_layernorm = zero_centred(c.dim, c.norm_eps)
        self.mlp = GatedMLP(c.dim, c.intermediate_size)
        self.final_layernorm = zero_centred(c.dim, c.norm_eps)

    def forward(self, hidden: torch.Tensor, codes: torch.Tensor, semantic: torch.Tensor, extra: torch.Tensor | None,
                rope_cs, layer: int, groups: list[RowGroup]) -> torch.Tensor:
        """hidden [N, D]; codes [N] this layer's input code of each row's frame; semantic [N] whether that frame's
        main token is semantic; extra [N, D] added to the code embedding (first shared layer) or None."""
        embedded = self.token_embedding(codes.clamp(0, self.token_embedding.num_embeddings - 1))
        embedded = torch.where(semantic[:, None], embedded, torch.zeros_like(embedded))
        if extra is not None:
            embedded = embedded + extra.to(embedded.dtype)
        mixed = self.eh_proj(torch.cat([self.enorm(embedded), self.hnorm(hidden)], dim=-1))
        attended = self._attend(self.input_layernorm(mixed), rope_cs, layer, groups)
        residual = mixed + attended
        return self.final_layernorm(residual + self.mlp(self.post_attention_layernorm(residual)))

    def _attend(self, x: torch.Tensor, rope_cs, layer: int, groups: list[RowGroup]) -> torch.Tensor:
        """Each group's rows attend causally over their sequence's earlier positions and themselves."""
        attn = self.self_attn
        q, k, v, gate = attn.project(x, rope_cs)  # q [N, H, D], k/v [N, Hkv, D]
        outs, row = [], 0
        for group in groups:
            rows = slice(row, row + group.count)
            keys, values = group.kv.write(layer, group.start, k[rows].transpose(0, 1), v[rows].transpose(0, 1))
            keys, values = keys.to(q.dtype), values.to(q.dtype)
            if group.count == 1:  # one newest row sees every key written so far: no mask (SDPA's fast path)
                out = F.scaled_dot_product_attention(q[rows].transpose(0, 1)[None], keys[None], values[None],
                                                     enable_gqa=attn.heads != attn.kv_heads)
            else:  # an additive float mask with the heads repeated: several times faster on CPU than a bool mask
                visible = torch.arange(keys.shape[1], device=x.device)[None] <= group.start + torch.arange(group.count, device=x.device)[:, None]
                mask = torch.zeros(visible.shape, dtype=q.dtype, device=x.device).masked_fill(~visible, float("-inf"))
                repeat = attn.heads // attn.kv_heads
                out = F.scaled_dot_product_attention(q[rows].transpose(0, 1)[None], keys.repeat_interleave(repeat, 0)[None],
                                                     values.repeat_interleave(repeat, 0)[None], attn_mask=mask)
            outs.append(out[0].transpose(0, 1).reshape(group.count, -1))
            row += group.count
        return attn.output(torch.cat(outs), gate)


Choose = Callable[[int, torch.Tensor], torch.Tensor]
"""choose(j, logits [N, V]) -> codes [N]: how a decode step picks code j+1 from head j."""


class CodebookTower(nn.Module):
    """`codebook_embeddings` ([K * V, D]: codebook c's rows at c * V), `shared_layers`, `residual_layers`,
    `codebook_heads` (one per predicted codebook)."""

    def __init__(self, c: CodebookDecoderConfig, semantic_start: int, semantic_end: int) -> None:
        super().__init__()
        self.config = c
        self.semantic_start, self.semantic_end = semantic_start, semantic_end
        self.codebook_embeddings = nn.Embedding(c.vocab_size * c.num_codebooks, c.dim)
        self.shared_layers = nn.ModuleList(TowerLayer(c) for _ in range(c.shared_enrichment_layers))
        self.residual_layers = nn.ModuleList(TowerLayer(c) for _ in range(c.num_codebooks - 1))
        self.codebook_heads = nn.ModuleList(nn.Linear(c.dim, c.vocab_size, bias=False) for _ in range(c.num_codebooks - 1))
        self.register_buffer("_offsets", torch.arange(c.num_codebooks) * c.vocab_size, persistent=False)

    def new_cache(self, dtype: torch.dtype, device: torch.device | str) -> TowerKV:
        c = self.config
        return TowerKV(c.num_layers, c.n_local_heads, c.head_dim, dtype, device)

    def is_semantic(self, tokens: torch.Tensor) -> torch.Tensor:
        return (tokens >= self.semantic_start) & (tokens <= self.semantic_end)

    def codebook_sum(self, frames: torch.Tensor, first: int, end: int) -> torch.Tensor:
        """[N, D] summed embeddings of codes first..end-1 of frames [N, 1 + K] (column 0 the main token)."""
        if first >= end:
            return self.codebook_embeddings.weight.new_zeros(frames.shape[0], self.config.dim)
        rows = frames[:, 1 + first : 1 + end].clamp(0, self.config.vocab_size - 1) + self._offsets[first:end]
        return self.codebook_embeddings(rows).sum(dim=1)

    def shared_input(self, frames: torch.Tensor) -> torch.Tensor:
        """The first shared layer's extra input: the input frame's codes the backbone did not take, if semantic."""
        c = self.config
        summed = self.codebook_sum(frames, 1 + c.vq_backbone_codebooks, c.num_codebooks)
        return torch.where(self.is_semantic(frames[:, 0])[:, None], summed, torch.zeros_like(summed))

    def run(self, hidden: torch.Tensor, positions: torch.Tensor, input_frames: torch.Tensor, main_tokens: torch.Tensor,
            groups: list[RowGroup], next_frames: torch.Tensor | None = None, choose: Choose | None = None) -> torch.Tensor:
        """Codes [N, K] of each row's next frame, writing every layer's keys/values at the rows' positions.

        hidden [N, D]: the backbone's final-normed states; input_frames [N, 1 + K]: each row's own frame;
        main_tokens [N]: the next frames' main tokens. Prefill passes the whole next frames [N, 1 + K] (codes are
        read, heads skipped); a decode step passes `choose`, which samples each code from its head's logits."""
        c = self.config
        for group in groups:
            group.kv.reserve(group.start + group.count)
        rope_cs = rope(positions, c.rotary_dim, c.rope_base)
        semantic = self.is_semantic(main_tokens)
        codes = [(main_tokens - self.semantic_start).clamp(0, c.vocab_size - 1)]
        x = hidden
        for index, layer in enumerate(self.shared_layers):
            extra = self.shared_input(input_frames) if index == 0 else None
            x = layer(x, codes[0], semantic, extra, rope_cs, index, groups)
        base = len(self.shared_layers)
        for j, (layer, head) in enumerate(zip(self.residual_layers, self.codebook_heads, strict=True)):
            x = layer(x, codes[j], semantic, None, rope_cs, base + j, groups)
            if next_frames is not None:
                codes.append(next_frames[:, 2 + j])
            else:
                assert choose is not None
                codes.append(choose(j, head(x)))
        for group in groups:
            group.kv.length = group.start + group.count
        return torch.stack(codes, dim=1)
