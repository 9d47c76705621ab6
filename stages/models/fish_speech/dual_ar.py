"""S2 Pro's two transformers, named as the checkpoint's tensors: the slow AR (`text_model.model.*`, a Qwen3-like
decoder over text and semantic tokens, embeddings tied to its output) and the fast AR (`audio_decoder.*`, which
fills in the 10 codes of each frame from the slow AR's hidden state).

Both use gpt-fast's layer spelling and interleaved RoPE (`stages/models/fish_common/gptfast.py`); the fast AR's per-frame loop
is the floor's `generate_frame_codes`, as Qwen3-TTS's code predictor's is.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.frame_codes import generate_frame_codes
from vocalis.stages.layers.attention import causal_mask, step_mask
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import StepTable, interleaved_rope
from vocalis.stages.models.fish_common.gptfast import gptfast_block
from vocalis.stages.models.fish_speech.config import FastARConfig, FishSpeechConfig, SlowARConfig
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache

ROPE_TABLE_DTYPE = torch.bfloat16
"""fish-speech stores its RoPE table in bfloat16; the rotation itself runs in float32."""


def _layers(c: SlowARConfig | FastARConfig) -> nn.ModuleList:
    return nn.ModuleList(gptfast_block(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size, c.norm_eps,
                                       qk_norm=c.attention_qk_norm) for _ in range(c.num_hidden_layers))


class SlowModel(nn.Module):
    """`text_model.model`: embeddings, layers, norm."""

    def __init__(self, c: SlowARConfig) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = _layers(c)
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)


class TextModel(nn.Module):
    def __init__(self, c: SlowARConfig) -> None:
        super().__init__()
        if not c.tie_word_embeddings:
            raise ValueError("text_config.tie_word_embeddings is false: S2 Pro ties its output to its embeddings, "
                             "and no untied output layout is published")
        self.model = SlowModel(c)


class AudioDecoder(nn.Module):
    """`audio_decoder`: the slow AR's codebook embeddings and the fast AR (embeddings, layers, norm, output)."""

    def __init__(self, c: FastARConfig) -> None:
        super().__init__()
        self.codebook_embeddings = nn.Embedding(c.vocab_size * c.num_codebooks, c.text_dim)
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = _layers(c)
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.output = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        # Only when the widths differ (S2 Pro's are equal, and it has no such tensor); named as upstream S2's code.
        self.project_in = nn.Linear(c.text_dim, c.hidden_size) if c.text_dim != c.hidden_size else nn.Identity()


class FishDualAR(nn.Module):
    def __init__(self, config: FishSpeechConfig) -> None:
        super().__init__()
        self.config = config
        self.text_model = TextModel(config.text)
        if config.audio_decoder.text_dim != config.text.hidden_size:
            raise ValueError(f"audio_decoder_config.text_dim {config.audio_decoder.text_dim} is not the slow AR's "
                             f"width {config.text.hidden_size}")
        self.audio_decoder = AudioDecoder(config.audio_decoder)
        fast = config.audio_decoder
        # a frame's fast-AR steps sit at positions 0 .. num_codebooks: the same rows every frame
        self.fast_rope = StepTable(partial(interleaved_rope, head_dim=fast.head_dim, theta=fast.rope_base,
                                           table_dtype=ROPE_TABLE_DTYPE), fast.num_codebooks + 1)

    # -- the slow AR ------------------------------------------------------------------------------------

    def embed(self, tokens: torch.Tensor, codes: torch.Tensor | None = None) -> torch.Tensor:
        """[..., D] inputs of tokens [...]: at semantic tokens, (text embedding + the frame's codes [..., K] through
        the codebook embeddings, each codebook its own block of rows) / sqrt(K + 1). S2's code divides always
        (fish-speech 0.1.0 only under `scale_codebook_embeddings`, which its goldens set)."""
        c = self.config.text
        x = self.text_model.model.embeddings(tokens)
        if codes is None:
            return x
        semantic = (tokens >= self.config.semantic_start_token_id) & (tokens <= self.config.semantic_end_token_id)
        offsets = torch.arange(c.num_codebooks, device=codes.device) * self.config.audio_decoder.vocab_size
        summed = self.audio_decoder.codebook_embeddings(codes + offsets).sum(dim=-2)
        with_codes = (x + summed) / math.sqrt(c.num_codebooks + 1)
        return torch.where(semantic[..., None], with_codes, x)

    def slow_rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.config.text
        return interleaved_rope(positions, c.head_dim, c.rope_base, ROPE_TABLE_DTYPE)

    def slow_dense(self, embeds: torch.Tensor) -> torch.Tensor:
        """Last-layer hidden states [B, L, D] (before the final norm) of whole rows, causally."""
        length = embeds.shape[1]
        rope = self.slow_rope(torch.arange(length, device=embeds.device))
        mask = causal_mask(length, device=embeds.device)
        x = embeds
        for layer in self.text_model.model.layers:
            x = layer.dense(x, rope, mask)
        return x

    def slow_cached(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Hidden states [T, D] (before the final norm) of a runtime step's flattened tokens over the slot cache."""
        rope = self.slow_rope(batch.token_positions.to(embeds.device))
        x = embeds
        for index, layer in enumerate(self.text_model.model.layers):
            x = layer.cached(x, rope, cache, index, batch)
        return x

    def slow_output(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm: S2 reads its token logits from this, and hands it to the fast AR (upstream S2's code and
        vLLM-Omni; fish-speech 0.1.0, the S1 code, handed over the hidden state before the norm)."""
        return self.text_model.model.norm(hidden)

    def token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., vocab] from hidden states: the final norm, then the tied embeddings (goldens, tests; a speech step reads
        SlowARStageModel.head's, the semantic and stop rows alone)."""
        return F.linear(self.slow_output(hidden), self.text_model.model.embeddings.weight)

    # -- the fast AR ------------------------------------------------------------------------------------

    def fast_step(self, inputs: torch.Tensor, caches: list[list[torch.Tensor]], start: int) -> torch.Tensor:
        """Hidden states [B, T, Df] of fast-AR inputs [B, T, Df] at positions start.., extending the caches."""
        t = inputs.shape[1]
        rope = self.fast_rope(start, t, inputs.device)
        mask = step_mask(t, start, inputs.device)
        x = inputs
        for layer, cache in zip(self.audio_decoder.layers, caches, strict=True):
            x = layer.dense(x, rope, mask, cache)
        return x

    def fast_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.audio_decoder.output(self.audio_decoder.norm(hidden))

    def frame_codes(self, slow_hidden: torch.Tensor, semantic_code: torch.Tensor, choose,
                    residual_vocab: int | None = None, forced: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Codes 1..K-1 [B, K-1] and their logits of each row's frame, from the slow AR's hidden state [B, D] and
        the frame's semantic code [B] (token id - semantic start). `residual_vocab`: the codec's residual codebook
        size, above which the fast AR's logits are masked (its head covers the larger semantic codebook)."""
        d = self.audio_decoder
        first = torch.stack([d.project_in(slow_hidden), d.embeddings(semantic_code)], dim=1)

        def head(_group: int, hidden: torch.Tensor) -> torch.Tensor:
            logits = self.fast_logits(hidden)
            if residual_vocab is not None and residual_vocab < logits.shape[-1]:
                logits = logits.clone()
                logits[:, residual_vocab:] = float("-inf")
            return logits

        return generate_frame_codes(first, self.fast_step, len(d.layers), self.config.text.num_codebooks - 1,
                                    head=head, embed=lambda _group, code: d.embeddings(code), choose=choose,
                                    forced=forced)
