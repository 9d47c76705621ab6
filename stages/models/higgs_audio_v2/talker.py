"""The talker: a Llama decoder whose every layer has a second, audio expert (DualFFN).

At audio positions (reference frames and generated frames) a layer normalises with `audio_input_layernorm` and
`audio_post_attention_layernorm` and runs `audio_mlp`; at text positions the usual norms and `mlp`. Attention is
shared. A frame's input is the sum over codebooks of `embed_audio_tokens` (one table, codebook k offset by
k x codebook_size); its output is one fused head giving every codebook's logits at once. Module names are the
transformers-native checkpoint's (`weights.py` renames Boson's).
"""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.layers.attention import QKVAttention
from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.norm import RMSNorm
from vocalis.stages.layers.rotary import inverse_frequencies, llama3_inverse_frequencies, rope
from vocalis.stages.models.higgs_audio_v2.config import HiggsAudioV2Config
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache

Route = tuple[str, torch.Tensor | None, torch.Tensor | None]
"""("audio" | "text" | "mixed", audio row indices, text row indices): where each expert runs in a step."""


def route_of(audio: torch.Tensor) -> Route:
    """The route of audio [T] bool on the device: two reads of it on the host (a direct caller's; the runtime's
    steps route by `route_of_flags`)."""
    if bool(audio.all()):
        return "audio", None, None
    if not bool(audio.any()):
        return "text", None, None
    return "mixed", audio.nonzero()[:, 0], (~audio).nonzero()[:, 0]


def route_of_flags(audio: list[bool], device: torch.device) -> Route:
    """The route of audio positions known on the host (no device read; the row indices of a mixed step are uploaded)."""
    if all(audio):
        return "audio", None, None
    if not any(audio):
        return "text", None, None
    rows = torch.tensor(audio, device=device)
    return "mixed", rows.nonzero()[:, 0], (~rows).nonzero()[:, 0]


def routed(x: torch.Tensor, route: Route, text_fn, audio_fn) -> torch.Tensor:
    """text_fn at text rows of x [T, H], audio_fn at audio rows."""
    kind, audio_rows, text_rows = route
    if kind == "audio":
        return audio_fn(x)
    if kind == "text":
        return text_fn(x)
    out = torch.empty_like(x)
    out.index_copy_(0, audio_rows, audio_fn(x.index_select(0, audio_rows)).to(x.dtype))
    out.index_copy_(0, text_rows, text_fn(x.index_select(0, text_rows)).to(x.dtype))
    return out


class DualFFNDecoderLayer(nn.Module):
    def __init__(self, c: HiggsAudioV2Config) -> None:
        super().__init__()
        self.self_attn = QKVAttention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, bias=c.attention_bias)
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.audio_mlp = GatedMLP(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.audio_input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.audio_post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x: torch.Tensor, route: Route, rotary, cache: SlotKVCache, index: int,
                batch: AttentionBatch) -> torch.Tensor:
        h = routed(x, route, self.input_layernorm, self.audio_input_layernorm)
        x = x + self.self_attn.cached(h, rotary, cache, index, batch)
        return x + routed(
            x, route,
            lambda t: self.mlp(self.post_attention_layernorm(t)),
            lambda t: self.audio_mlp(self.audio_post_attention_layernorm(t)),
        )


class AudioEmbeddings(nn.Module):
    def __init__(self, c: HiggsAudioV2Config) -> None:
        super().__init__()
        self.embed_audio_tokens = nn.Embedding(c.num_codebooks * c.codebook_size, c.hidden_size)
        self.register_buffer("audio_tokens_offsets", torch.arange(c.num_codebooks) * c.codebook_size, persistent=False)
        self.scale = 1.0 / c.num_codebooks if c.audio_embed_avg else 1.0

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """[..., H] of frames [..., K]."""
        summed = self.embed_audio_tokens(codes + self.audio_tokens_offsets).sum(dim=-2)
        return summed * self.scale if self.scale != 1.0 else summed


class Backbone(nn.Module):
    def __init__(self, c: HiggsAudioV2Config) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.embed_audio_tokens = AudioEmbeddings(c)
        self.layers = nn.ModuleList(DualFFNDecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class HiggsAudioV2Talker(nn.Module):
    def __init__(self, config: HiggsAudioV2Config) -> None:
        super().__init__()
        self.config = config
        self.model = Backbone(config)
        self.audio_lm_head = nn.Linear(config.hidden_size, config.num_codebooks * config.codebook_size, bias=False)
        inv = inverse_frequencies(config.head_dim, config.rope_theta)
        scaling = config.rope_scaling
        if scaling is not None:
            inv = llama3_inverse_frequencies(inv, scaling.factor, scaling.low_freq_factor, scaling.high_freq_factor,
                                             scaling.original_max_position_embeddings)
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x: torch.Tensor, route: Route, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Final hidden states [T, H] of inputs x [T, H], each layer's experts where `route` says."""
        c = self.config
        rotary = rope(batch.token_positions.to(x.device), c.head_dim, c.rope_theta, self.inv_freq)
        for index, layer in enumerate(self.model.layers):
            x = layer(x, route, rotary, cache, index, batch)
        return self.model.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., K, codebook_size] of hidden states [..., H]."""
        c = self.config
        return self.audio_lm_head(hidden).unflatten(-1, (c.num_codebooks, c.codebook_size))
