"""GLM-TTS on the runtime: the voice prompt encoded ahead (PrepareStage), the Llama speech LM as an
AutoregressiveStage, and flow matching (the GLM DiT) + HiFT as a ChunkStage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from vocalis.stages.layers.allowed_rows_head import AllowedRowsHead
from vocalis.stages.models.cosyvoice_common.ras_sampling import SamplingHistory, sample_speech_tokens
from vocalis.stages.models.cosyvoice_common.voice_prompt import CloneInput
from vocalis.stages.models.glm_tts.lm import GLMSpeechLM
from vocalis.stages.models.glm_tts.tokenizer import GLMTokenizer
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState

STOP = -1
"""The frame a stop token becomes (speech frames are 0 .. speech_tokens - 1)."""
MAX_TOKENS = 2048
"""The text-length budget's ceiling (the peer's stage max_tokens)."""


def normalize_text(text: str) -> str:
    """Whitespace collapsed. The published frontend's WeTextProcessing normaliser (numbers, dates, punctuation) is not
    reproduced: text reaches the tokenizer as written."""
    return " ".join(text.split())


GLMTTSInput = CloneInput
"""Stage-0 input of a session, made by the adapter (the lineage's, `cosyvoice_common/voice_prompt.py`)."""


@dataclass
class SequenceState:
    min_tokens: int
    """No stop token before this many speech tokens."""
    history: SamplingHistory


@dataclass(frozen=True)
class TokenBudget:
    min_ratio: float = 2.0
    max_ratio: float = 20.0


class GLMTTSLM(AutoregressiveModel):
    """The stage model: prompt ids in, one speech token (0-based) per step out, STOP at a stop token."""

    emits_eos_frame = False

    def __init__(self, lm: GLMSpeechLM, tokenizer: GLMTokenizer, max_len: int, budget: TokenBudget = TokenBudget()) -> None:
        self.lm, self.tokenizer, self.budget = lm, tokenizer, budget
        c = lm.config
        self.cache_shape = CacheShape(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, min(max_len, c.max_position_embeddings))
        self.audio_start, self.speech_tokens = tokenizer.audio_start, tokenizer.speech_tokens
        self.stop_ids = tokenizer.stop_ids()
        self.begin_of_audio = tokenizer.begin_of_audio()
        self.vocab_size = c.vocab_size
        allowed = torch.zeros(c.vocab_size, dtype=torch.bool)
        allowed[self.audio_start:self.audio_start + self.speech_tokens] = True
        allowed[self.stop_ids] = True
        self.head = AllowedRowsHead(lm.head_weight, allowed)
        """Only speech and stop tokens can be picked (the published decoder warns on others and passes them to the
        flow, which cannot voice them): the head computes their logits alone, the others are -inf. A linear of the
        llm stage's (its packing and quantisation apply)."""
        stop = torch.zeros(c.vocab_size, dtype=torch.bool)
        stop[self.stop_ids] = True
        self.stop = stop
        """[V]: the stop tokens (moved to the model's device once, with `allowed`)."""

    def prompt_ids(self, ref_text: str, text: str, prompt_speech: list[int]) -> list[int]:
        """[reference transcript + " ", text, <|begin_of_audio|>, the reference's speech tokens as <|audio_k|>]."""
        encode = self.tokenizer.encode
        return (encode(normalize_text(ref_text) + " ") + encode(normalize_text(text)) + [self.begin_of_audio]
                + [self.audio_start + t for t in prompt_speech])

    def token_budget(self, text: str) -> tuple[int, int]:
        """(min, max) speech tokens for `text`: its token count times the deploy's ratios, the max at most 2048."""
        count = len(self.tokenizer.encode(normalize_text(text)))
        return max(1, int(count * self.budget.min_ratio)), min(MAX_TOKENS, max(1, int(count * self.budget.max_ratio)))

    def start(self, request: SynthesisRequest[GLMTTSInput], payload: object = None) -> SequenceStart:
        inputs = request.stage_input
        voice = request.prepared
        ids = self.prompt_ids(inputs.ref_text, request.text, voice.speech_tokens)
        embeds = self.lm.embed(ids)
        low, high = self.token_budget(request.text)
        if inputs.max_new_tokens is not None:  # a cap on the text-length budget, as the peer's GLM-TTS adapter applies it
            high = min(high, inputs.max_new_tokens)
        sampling = dataclasses.replace(inputs.sampling, max_new_tokens=high)
        history = SamplingHistory.start(sampling, inputs.ras, self.vocab_size, self.lm.device)
        return SequenceStart(embeds, sampling, SequenceState(min(low, high), history))

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.lm(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[SequenceState]) -> torch.Tensor:
        """Frames [B, 1] on the host (the step's one crossing): the allowed-token and stop masks, RAS or top-k, each
        sequence's history and the token-to-frame mapping run on the model's device."""
        if self.stop.device != hidden.device:  # moved once, not uploaded every step
            self.stop = self.stop.to(hidden.device)
        logits = self.head(hidden)
        early = [state.history.steps < state.min_tokens for state in states]  # no stop before the text's minimum
        if any(early):
            logits = logits.masked_fill(torch.tensor(early, device=logits.device)[:, None] & self.stop, float("-inf"))
        tokens = sample_speech_tokens(logits, samplers, [state.history for state in states])
        frames = torch.where(self.stop[tokens], STOP, tokens - self.audio_start)
        return frames[:, None].cpu()

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] < 0

    def frame_embeds(self, frames: torch.Tensor, states: list[SequenceState]) -> torch.Tensor:
        return self.lm.embed(frames[:, 0].to(self.lm.device) + self.audio_start)

