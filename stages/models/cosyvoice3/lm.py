"""The speech-token LM of CosyVoice3 (`llm.pt`): a Qwen2 decoder over [sos, text, task id, prompt speech tokens] that
emits 25 Hz speech tokens, named as the file's tensors (`llm.model.model.*`, `llm_decoder`, `speech_embedding`)."""

from __future__ import annotations

import torch
from torch import nn

from vocalis.stages.models.cosyvoice3.config import LMConfig, Qwen2Config
from vocalis.stages.models.cosyvoice_common.rope_stack import DecoderStack, run_cached, run_dense
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.kv_cache import SlotKVCache

UNUSED_KEYS = (r"llm\.model\.lm_head\.weight",)
"""The Qwen2 text head: the speech LM decodes through `llm_decoder` only (declared unused)."""


def qwen2_model(c: Qwen2Config) -> DecoderStack:
    """The Qwen2 backbone: biases on q/k/v, none on o."""
    return DecoderStack(c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
                        c.head_dim, c.intermediate_size, c.rms_norm_eps, bias=True, o_bias=False)


class _CausalLM(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.model = qwen2_model(c)


class _Encoder(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.model = _CausalLM(c)


class CosyVoice3LM(nn.Module):
    def __init__(self, qwen: Qwen2Config, lm: LMConfig, decoder_bias: bool = False) -> None:
        super().__init__()
        self.qwen, self.config = qwen, lm
        self.llm = _Encoder(qwen)
        vocab = lm.speech_token_size + lm.stop_tokens
        self.llm_decoder = nn.Linear(lm.llm_output_size, vocab, bias=decoder_bias)
        self.speech_embedding = nn.Embedding(vocab, lm.llm_input_size)

    @property
    def backbone(self) -> DecoderStack:
        return self.llm.model.model

    @property
    def device(self) -> torch.device:
        return self.llm_decoder.weight.device

    def prompt_embeds(self, text_ids: list[int], prompt_speech: list[int]) -> torch.Tensor:
        """[P, H]: sos, the text (the reference's transcript, then the text to speak), task id, the prompt's speech tokens."""
        device = self.device
        speech = self.speech_embedding.weight
        text = self.backbone.embed_tokens(torch.tensor(text_ids, dtype=torch.long, device=device))
        prompt = self.speech_embedding(torch.tensor(prompt_speech, dtype=torch.long, device=device))
        return torch.cat([speech[self.config.sos][None], text, speech[self.config.task_id][None], prompt])

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Hidden states [T, H] of a step's flattened tokens over the runtime's KV cache."""
        return run_cached(self.backbone.layers, self.backbone.norm, embeds, batch, cache, self.qwen.head_dim, self.qwen.rope_theta)

    def dense(self, embeds: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, H] of whole rows (causal), without the runtime's cache (tests, goldens)."""
        return run_dense(self.backbone.layers, self.backbone.norm, embeds, self.qwen.head_dim, self.qwen.rope_theta)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.llm_decoder(hidden).float()
