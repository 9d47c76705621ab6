"""GLM-TTS's speech LM (`llm/`): a transformers Llama (HF tensor names) over [reference transcript, text,
<|begin_of_audio|>, the reference's speech tokens as <|audio_k|> ids], emitting <|audio_k|> ids at 25 Hz until a stop
token. Built from the shared decoder layer; the head is tied to the embeddings unless the config says otherwise."""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.models.cosyvoice_common.rope_stack import DecoderStack, run_cached, run_dense
from vocalis.stages.models.glm_tts.config import LlamaConfig
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache

TIED_HEAD_KEYS = (r"lm_head\.weight",)
"""A tied head saved anyway: the embeddings are used, the copy is declared unused."""


class GLMSpeechLM(nn.Module):
    """`model.*` and, untied, `lm_head`."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        if config.mlp_bias:
            raise ValueError("llm/config.json: mlp_bias is not supported (the published GLM-TTS has none)")
        self.config = config
        self.model = DecoderStack(config.vocab_size, config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                                  config.num_key_value_heads, config.head_dim, config.intermediate_size, config.rms_norm_eps,
                                  bias=config.attention_bias)
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @property
    def device(self) -> torch.device:
        return self.model.embed_tokens.weight.device

    def embed(self, ids: list[int] | torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        return self.model.embed_tokens(ids)

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Hidden states [T, H] of a step's flattened tokens over the runtime's KV cache."""
        return run_cached(self.model.layers, self.model.norm, embeds, batch, cache, self.config.head_dim, self.config.rope_theta)

    def dense(self, embeds: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, H] of whole rows (causal), without the runtime's cache (tests, goldens)."""
        return run_dense(self.model.layers, self.model.norm, embeds, self.config.head_dim, self.config.rope_theta)

    @property
    def head_weight(self) -> torch.Tensor:
        """[vocab, hidden]: the embeddings when tied, else lm_head's."""
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float logits over the whole vocabulary (goldens, tests; a speech step reads GLMTTSLM.head's)."""
        return (hidden @ self.head_weight.T).float()
