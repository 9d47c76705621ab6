"""CosyVoice3 on the runtime: the voice prompt encoded ahead (PrepareStage), the speech-token LM as an
AutoregressiveStage, and flow matching + HiFT as a ChunkStage (the shared FlowVocoderDecoder)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from vocalis.stages.models.cosyvoice3.tokenizer import prompt_text
from vocalis.stages.models.cosyvoice3.weights import CosyVoice3Modules
from vocalis.stages.models.cosyvoice_common.ras_sampling import SamplingHistory, sample_speech_tokens
from vocalis.stages.models.cosyvoice_common.voice_prompt import CloneInput, VoicePrompt
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState

CosyVoice3Input = CloneInput
"""Stage-0 input of a session, made by the adapter (the lineage's, `cosyvoice_common/voice_prompt.py`)."""


@dataclass
class SequenceState:
    min_tokens: int
    """No stop token before this many speech tokens."""
    history: SamplingHistory


MAX_TOKENS = 2048
"""The text-length budget's ceiling (the peer's: min(2048, text tokens x 20)); max_new_tokens may go past it."""


class SpeechLM(AutoregressiveModel):
    emits_eos_frame = False

    def __init__(self, modules: CosyVoice3Modules, max_len: int) -> None:
        self.modules = modules
        self.lm = modules.lm
        q = modules.config.qwen
        self.cache_shape = CacheShape(q.num_hidden_layers, q.num_key_value_heads, q.head_dim, min(max_len, q.max_position_embeddings))
        self.speech_tokens = modules.config.lm.speech_token_size
        self.vocab = self.lm.llm_decoder.out_features
        """Speech tokens, then the stop tokens."""

    def token_budget(self, text: str) -> tuple[int, int]:
        """(min, max) speech tokens for `text`: its token count times the ratios (2 and 20), the max at most 2048."""
        count = len(self.modules.tokenizer.encode(text))
        lm = self.modules.config.lm
        return max(1, int(count * lm.min_token_text_ratio)), min(MAX_TOKENS, max(1, int(count * lm.max_token_text_ratio)))

    def start(self, request: SynthesisRequest[CosyVoice3Input], payload: object = None) -> SequenceStart:
        inputs = request.stage_input
        voice: VoicePrompt = request.prepared
        tokenizer = self.modules.tokenizer
        ids = tokenizer.encode(prompt_text(inputs.ref_text)) + tokenizer.encode(request.text)
        embeds = self.lm.prompt_embeds(ids, voice.speech_tokens)
        low, high = self.token_budget(request.text)
        if inputs.max_new_tokens is not None:
            high = inputs.max_new_tokens
        sampling = dataclasses.replace(inputs.sampling, max_new_tokens=high)
        history = SamplingHistory.start(sampling, inputs.ras, self.vocab, self.lm.device)
        return SequenceStart(embeds, sampling, SequenceState(min(low, high), history))

    def first_chunk_frames(self, request: SynthesisRequest[CosyVoice3Input]) -> int | None:
        return request.stage_input.initial_codec_chunk_frames

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.lm(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[SequenceState]) -> torch.Tensor:
        """Speech tokens [B, 1] on the host (the step's one crossing): the stop-token mask, RAS or the standard
        sampler, and each sequence's history run on the model's device."""
        logits = self.lm.logits(hidden)
        early = [state.history.steps < state.min_tokens for state in states]  # no stop token before the text's minimum
        if any(early):
            stop = torch.arange(logits.shape[-1], device=logits.device) >= self.speech_tokens
            logits = logits.masked_fill(torch.tensor(early, device=logits.device)[:, None] & stop, float("-inf"))
        tokens = sample_speech_tokens(logits, samplers, [state.history for state in states])
        return tokens[:, None].cpu()

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] >= self.speech_tokens

    def frame_embeds(self, frames: torch.Tensor, states: list[SequenceState]) -> torch.Tensor:
        return self.lm.speech_embedding(frames[:, 0].to(self.lm.device))
