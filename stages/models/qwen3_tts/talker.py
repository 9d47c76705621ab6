"""The talker (a Qwen3 decoder that predicts codebook 0 of each 12.5 Hz frame) and its code predictor
(a small decoder that fills in codebooks 1..G-1 of the frame), named as in the checkpoints' `talker.*`."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.frame_codes import generate_frame_codes
from vocalis.stages.layers.attention import step_mask
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import StepTable, mrope, rope
from vocalis.stages.layers.transformer import gated_decoder_layers
from vocalis.stages.models.qwen3_tts.config import CodePredictorConfig, TalkerConfig
from vocalis.stages.models.qwen3_tts.frame_code_graphs import FrameCodeGraphs
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache


class TalkerModel(nn.Module):
    def __init__(self, config: TalkerConfig) -> None:
        super().__init__()
        self.codec_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.text_embedding = nn.Embedding(config.text_vocab_size, config.text_hidden_size)
        self.layers = gated_decoder_layers(config, qk_norm=True)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class TextProjection(nn.Module):
    """Text embeddings (text_hidden_size) into the talker's width: a two-layer SiLU MLP with biases."""

    def __init__(self, text_hidden: int, hidden: int) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(text_hidden, text_hidden, bias=True)
        self.linear_fc2 = nn.Linear(text_hidden, hidden, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class PredictorModel(nn.Module):
    def __init__(self, config: CodePredictorConfig, embedding_dim: int) -> None:
        super().__init__()
        self.layers = gated_decoder_layers(config, qk_norm=True)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(config.vocab_size, embedding_dim) for _ in range(config.num_code_groups - 1)
        )


class CodePredictor(nn.Module):
    """Codebooks 1..G-1 of a frame, one at a time, from [talker hidden, embedding of code 0]."""

    def __init__(self, config: CodePredictorConfig, talker_hidden: int) -> None:
        super().__init__()
        self.config = config
        self.model = PredictorModel(config, talker_hidden)
        self.lm_head = nn.ModuleList(
            nn.Linear(config.hidden_size, config.vocab_size, bias=False) for _ in range(config.num_code_groups - 1)
        )
        # Only when the widths differ (the 1.7B models); the 0.6B ones have no such tensor.
        self.small_to_mtp_projection = (
            nn.Linear(talker_hidden, config.hidden_size, bias=True) if config.hidden_size != talker_hidden else nn.Identity()
        )
        # a frame's sub-steps sit at positions 0 .. G-1 (the first step two of them): the same rows every frame
        self.rope_table = StepTable(partial(rope, head_dim=config.head_dim, theta=config.rope_theta), config.num_code_groups)

    def step(self, embeds: torch.Tensor, caches: list[list[torch.Tensor]], start: int) -> torch.Tensor:
        """Hidden states [B, T, H] of new inputs [B, T, talker_hidden] at positions start.., extending caches."""
        x = self.small_to_mtp_projection(embeds)
        t = x.shape[1]
        rotary = self.rope_table(start, t, x.device, x.dtype)
        mask = step_mask(t, start, x.device)
        for layer, cache in zip(self.model.layers, caches, strict=True):
            x = layer.dense(x, rotary, mask, cache)
        return self.model.norm(x)

    def static_step(self, embeds: torch.Tensor, buffers: list[tuple[torch.Tensor, torch.Tensor]], start: int) -> torch.Tensor:
        """`step` over preallocated per-layer (k, v) buffers [B, Hkv, positions, D] (see FrameCodeGraphs)."""
        x = self.small_to_mtp_projection(embeds)
        t = x.shape[1]
        rotary = self.rope_table(start, t, x.device, x.dtype)
        mask = step_mask(t, start, x.device)
        for layer, (k, v) in zip(self.model.layers, buffers, strict=True):
            x = layer.dense(x, rotary, mask, static_kv=(k, v, start))
        return self.model.norm(x)

    def frame_code_graphs(self, sizes, capture: bool | None = None) -> FrameCodeGraphs:
        """The sub-step loop on static buffers padded to `sizes` (CUDA graphs on a GPU), for `generate(graphs=)`."""
        c = self.config
        weight = self.model.codec_embedding[0].weight  # an embedding: its dtype and device whatever the heads' weights
        return FrameCodeGraphs(
            self.static_step, len(self.model.layers), c.num_code_groups - 1, head=lambda group, hidden: self.lm_head[group](hidden),
            embed=lambda group, code: self.model.codec_embedding[group](code), kv_heads=c.num_key_value_heads, head_dim=c.head_dim,
            input_width=self.model.codec_embedding[0].weight.shape[1], dtype=weight.dtype, device=weight.device, sizes=sizes,
            capture=capture)

    def generate(self, talker_hidden: torch.Tensor, code0_embeds: torch.Tensor, choose, forced: torch.Tensor | None = None,
                 graphs: FrameCodeGraphs | None = None):
        """Codes [B, G-1] and logits [B, G-1, V] for a batch of frames.

        `choose(step, logits [B, V]) -> codes [B]` picks each codebook's codes (sampling lives with the
        caller); `forced` [B, G-1] feeds given codes instead (teacher forcing) while still returning logits.
        `graphs`: run the loop on its static buffers when the batch fits (eagerly otherwise).
        """
        first = torch.stack([talker_hidden, code0_embeds], dim=1)
        if graphs is not None and forced is None:
            result = graphs.generate(first, choose)
            if result is not None:
                return result
        return generate_frame_codes(
            first, self.step, len(self.model.layers),
            self.config.num_code_groups - 1, head=lambda group, hidden: self.lm_head[group](hidden),
            embed=lambda group, code: self.model.codec_embedding[group](code), choose=choose, forced=forced)


class Talker(nn.Module):
    """`talker.*` of a checkpoint: the decoder, the text projection, the codec head, the code predictor."""

    def __init__(self, config: TalkerConfig) -> None:
        super().__init__()
        self.config = config
        self.model = TalkerModel(config)
        self.text_projection = TextProjection(config.text_hidden_size, config.hidden_size)
        self.codec_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.code_predictor = CodePredictor(config.code_predictor, config.hidden_size)

    def embed_text(self, ids: torch.Tensor | list[int]) -> torch.Tensor:
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.model.codec_embedding.weight.device)
        return self.text_projection(self.model.text_embedding(ids))

    def embed_codec(self, ids: torch.Tensor | list[int]) -> torch.Tensor:
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.model.codec_embedding.weight.device)
        return self.model.codec_embedding(ids)

    def embed_frames(self, frames: torch.Tensor) -> torch.Tensor:
        """[..., G] codes to [..., H]: codebook 0 through the talker's table, the others through the predictor's."""
        total = self.model.codec_embedding(frames[..., 0])
        for group, table in enumerate(self.code_predictor.model.codec_embedding, start=1):
            total = total + table(frames[..., group])
        return total

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        c = self.config
        positions = batch.token_positions.to(embeds.device)
        cos, sin = mrope(positions.expand(3, -1), c.head_dim, c.rope_theta, c.mrope_section, c.mrope_interleaved)
        rotary = (cos.to(embeds.dtype), sin.to(embeds.dtype))
        x = embeds
        for index, layer in enumerate(self.model.layers):
            x = layer.cached(x, rotary, cache, index, batch)
        return self.model.norm(x)
