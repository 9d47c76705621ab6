"""GLM-TTS's flow decoder (`flow/flow.pt`, the published `Flow`): a DiT velocity estimator that embeds the speech
tokens itself (a ConvNeXt-V2 text embedding at mel rate) and takes the speaker embedding through adaLN, and the
flow-matching sampler around it. Named as the checkpoint's `estimator.*` and `spk_embed_affine_layer.*` tensors.

It shares the F5-TTS block with CosyVoice3's DiT (`flow_dit`: time embedding, the partial interleaved rotary, adaLN-zero
blocks) and the guided Euler solver (`flow_matching`). What differs, kept on purpose: tokens are stretched to the mel
length by nearest interpolation and embedded (row 0 of the table is the filler), plus a cos|sin position table, through
ConvNeXt-V2 blocks whose GRN normalises over the whole sequence; the position convolution is centred, not causal;
attention is full (the published whole-utterance path) unless a block pattern is given (its streaming path); the
adaLN input is [time embedding, L2-normalised speaker embedding]; unconditional guidance drops the prompt mel and the
speaker but keeps the tokens unless `speech_token_cfg`.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.flow_dit import (
    AdaLayerNormZeroFinal,
    ConvPositionEmbedding,
    DiTBlock,
    RotaryEmbedding,
    TimestepEmbedding,
)
from vocalis.stages.components.flow_matching import cosine_time_span, fixed_noise, guided_euler

TEXT_POSITIONS = 4096
"""Rows of the text embedding's position table; later frames reuse the last (as published)."""


def position_table(dim: int, length: int, theta: float = 10000.0) -> torch.Tensor:
    """[length, dim]: cos of position x frequency in the first half, sin in the second."""
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim)
    angles = torch.outer(torch.arange(length).float(), freqs)
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


class GRN(nn.Module):
    """Global response normalisation: each channel scaled by its L2 norm over time relative to the channels' mean."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        return self.gamma * (x * (norm / (norm.mean(dim=-1, keepdim=True) + 1e-6))) + self.beta + x


class ConvNeXtV2Block(nn.Module):
    """`dwconv` (depthwise, kernel 7, centred), `norm`, `pwconv1`, GELU, `grn`, `pwconv2`, residual; [B, T, C]."""

    def __init__(self, dim: int, intermediate_dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.grn = GRN(intermediate_dim)
        self.pwconv2 = nn.Linear(intermediate_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x.transpose(1, 2)).transpose(1, 2)
        return x + self.pwconv2(self.grn(F.gelu(self.pwconv1(self.norm(y)))))


class TextEmbedding(nn.Module):
    """`text_embed` (vocab + 1 rows, 0 the filler) and `text_blocks`: tokens [B, T] -> features [B, L, C] at mel rate."""

    def __init__(self, vocab_size: int, dim: int, conv_layers: int, conv_mult: int = 2) -> None:
        super().__init__()
        self.text_embed = nn.Embedding(vocab_size + 1, dim)
        self.text_blocks = nn.Sequential(*(ConvNeXtV2Block(dim, dim * conv_mult) for _ in range(conv_layers))) if conv_layers else None
        self.register_buffer("freqs_cis", position_table(dim, TEXT_POSITIONS), persistent=False)

    def forward(self, tokens: torch.Tensor, length: int) -> torch.Tensor:
        if int(tokens.max()) >= self.text_embed.num_embeddings:
            raise ValueError(f"speech token {int(tokens.max())} is past the flow's vocabulary ({self.text_embed.num_embeddings})")
        tokens = F.interpolate(tokens[:, None].float(), size=length, mode="nearest")[:, 0].long()
        x = self.text_embed(tokens)
        if self.text_blocks is not None:
            positions = torch.arange(length, device=x.device).clamp(max=TEXT_POSITIONS - 1)
            x = self.text_blocks(x + self.freqs_cis[positions].to(x.dtype))
        return x


class EmbeddingConcater(nn.Module):
    """`proj` of [noisy mel, condition, token features], plus its convolutional position embedding."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(in_dim, out_dim)
        self.conv_pos_embed = ConvPositionEmbedding(out_dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        x = self.proj(torch.cat([x, cond, text], dim=-1))
        return self.conv_pos_embed(x) + x


def block_attention_mask(blocks: list[int], length: int) -> torch.Tensor:
    """[length, length] bool of the published streaming mask over mel-frame blocks (the last size repeating): a frame
    sees everything up to the end of its block, and at least half its block (two thirds past 172 frames) ahead."""
    sizes = list(itertools.islice(itertools.chain(blocks, itertools.repeat(blocks[-1])), length + 1))
    ends = list(itertools.accumulate(sizes))
    reach = torch.empty(length, dtype=torch.long)
    start = 0
    for size, end in zip(sizes, ends, strict=False):
        if start >= length:
            break
        minimum = int(size / 2) if size <= 172 else int(size / 1.5)
        for i in range(start, min(end, length)):
            ahead = end - 1 - i
            reach[i] = end + max(0, minimum - ahead)
        start = end
    return torch.arange(length)[None, :] < reach[:, None]


def token_blocks_to_mel(blocks: list[int]) -> list[int]:
    """The published conversion of token block sizes to mel frames (written for 12.5 Hz tokens and 86 Hz mel, and
    used unchanged by the 25 Hz model)."""
    return [int(b / 12.5 * 22050 / 256) for b in blocks]


class GLMDiT(nn.Module):
    """The velocity v(x, t | tokens, cond, speaker): x, cond [B, L, *] channels last, tokens [B, T] -> [B, L, mel_dim]."""

    def __init__(self, *, trans_dim: int, depth: int, heads: int, dim_head: int = 64, ff_mult: float = 4, mel_dim: int = 80,
                 text_vocab_size: int = 100000, text_emb_dim: int, conv_layers: int = 0, condition_dim: int = 0,
                 spkr_dim: int = 0, long_skip_connection: bool = False) -> None:
        super().__init__()
        self.spkr_dim = spkr_dim
        self.time_embed = TimestepEmbedding(trans_dim)
        self.text_emb_layer = TextEmbedding(text_vocab_size, text_emb_dim, conv_layers)
        self.emb_concator = EmbeddingConcater(mel_dim + text_emb_dim + condition_dim, trans_dim)
        self.rotary_embed = RotaryEmbedding(dim_head)
        emb_dim = trans_dim + spkr_dim
        self.transformer_blocks = nn.ModuleList(DiTBlock(trans_dim, heads, dim_head, ff_mult, emb_dim) for _ in range(depth))
        self.long_skip_connection = nn.Linear(trans_dim * 2, trans_dim, bias=False) if long_skip_connection else None
        self.norm_out = AdaLayerNormZeroFinal(trans_dim, emb_dim)
        self.proj_out = nn.Linear(trans_dim, mel_dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, tokens: torch.Tensor, t: torch.Tensor, spks: torch.Tensor | None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        length = x.shape[1]
        emb = self.time_embed(t)
        if self.spkr_dim:
            emb = torch.cat([emb, spks.to(emb.dtype)], dim=-1)
        x = self.emb_concator(x, cond, self.text_emb_layer(tokens, length))
        residual = x
        freqs = self.rotary_embed(length).to(x.dtype)
        for block in self.transformer_blocks:
            x = block(x, emb, freqs, mask)
        if self.long_skip_connection is not None:
            x = self.long_skip_connection(torch.cat([x, residual], dim=-1))
        return self.proj_out(self.norm_out(x, emb))


class GLMFlow(nn.Module):
    """`estimator` and, unless `remove_spkr_concat_condition`, `spk_embed_affine_layer` (speaker concatenated to the
    condition). Tokens [1, T] after the prompt's [1, P] -> mel [1, mel_dim, T * token_mel_ratio]."""

    def __init__(self, estimator: GLMDiT, *, mel_dim: int = 80, spk_embed_dim: int = 80, token_mel_ratio: int = 2,
                 speaker_concat: bool = False, speech_token_cfg: bool = True, inference_cfg_rate: float = 0.7,
                 t_scheduler: str = "cosine") -> None:
        super().__init__()
        self.estimator = estimator
        self.spk_embed_affine_layer = nn.Linear(192, spk_embed_dim) if speaker_concat else None
        self.mel_dim, self.token_mel_ratio = mel_dim, token_mel_ratio
        self.speech_token_cfg, self.inference_cfg_rate, self.t_scheduler = speech_token_cfg, inference_cfg_rate, t_scheduler
        self.register_buffer("rand_noise", fixed_noise(mel_dim), persistent=False)

    def time_span(self, steps: int, device: torch.device) -> torch.Tensor:
        if self.t_scheduler == "cosine":
            return cosine_time_span(steps, device)
        return torch.linspace(0, 1, steps + 1, device=device)

    def inference(self, tokens: torch.Tensor, prompt_tokens: torch.Tensor, prompt_feat: torch.Tensor, embedding: torch.Tensor,
                  n_timesteps: int = 10, noise: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`prompt_feat` [1, P * ratio, mel_dim], `embedding` [1, 192]; `noise` [1, mel_dim, L] replaces the fixed start
        noise (tests); `mask` [L, L] bool restricts attention (the published streaming's block mask)."""
        all_tokens = torch.cat([prompt_tokens, tokens], dim=1).long()
        length = all_tokens.shape[1] * self.token_mel_ratio
        if noise is None:
            if length > self.rand_noise.shape[2]:
                raise ValueError(f"{length} mel frames exceed the flow decoder's {self.rand_noise.shape[2]} frames of start noise")
            noise = self.rand_noise[:, :, :length]
        device = all_tokens.device
        cond = torch.zeros(1, length, self.mel_dim, device=device)
        prompt_frames = min(prompt_feat.shape[1], length)
        cond[:, :prompt_frames] = prompt_feat[:, prompt_feat.shape[1] - prompt_frames:].to(cond)
        speaker = F.normalize(embedding.float(), dim=1)
        if self.spk_embed_affine_layer is not None:
            cond = torch.cat([cond, self.spk_embed_affine_layer(speaker)[:, None].expand(-1, length, -1)], dim=-1)
        tokens2 = torch.cat([all_tokens, torch.zeros_like(all_tokens) if self.speech_token_cfg else all_tokens])
        cond2 = torch.cat([cond, torch.zeros_like(cond)])
        speaker2 = torch.cat([speaker, torch.zeros_like(speaker)])

        dtype = self.estimator.proj_out.weight.dtype  # the DiT may run in another dtype (the flow stage's) than x and t
        cond2, speaker2 = cond2.to(dtype), speaker2.to(dtype)

        def velocity(x2: torch.Tensor, t2: torch.Tensor, _step: int) -> torch.Tensor:
            return self.estimator(x2.to(dtype), cond2, tokens2, t2, speaker2, mask)

        x = noise.to(device).transpose(1, 2).float()
        mel = guided_euler(velocity, x, self.time_span(n_timesteps, device), self.inference_cfg_rate)
        return mel[:, prompt_feat.shape[1]:].transpose(1, 2)
