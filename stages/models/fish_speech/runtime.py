"""S2 Pro on the runtime: the slow AR (+ the fast AR inside each step) emitting 10-code frames as an
AutoregressiveStage, and the shared DAC decoding them into 44.1 kHz audio as a ChunkStage."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.layers.allowed_rows_head import AllowedRowsHead
from vocalis.stages.models.fish_common.codec import ClipInput, ReferenceEncoder
from vocalis.stages.models.fish_speech.prompt import ControlTokenInText, FishTokenizer, Prompt, clone_prompt, text_only_prompt
from vocalis.stages.models.fish_speech.weights import FishSpeechModules
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SeenTokens, mark_seen, sample_states

EOS_CODE = -1
"""Codebook 0 of the frame that ends a sequence (the slow AR chose <|im_end|>); never emitted."""


FishSpeechInput = ClipInput
"""Stage-0 input of a session, made by the adapter (the lineage's, `fish_common/codec.py`)."""


@dataclass
class SequenceState:
    fast: SamplerState
    seen: SeenTokens | None = None
    """The semantic token ids generated so far, on the device, for the repetition penalty (None without one)."""


class SlowARStageModel(AutoregressiveModel):
    emits_eos_frame = False

    def __init__(self, modules: FishSpeechModules, tokenizer: FishTokenizer, max_len: int,
                 encoder: ReferenceEncoder | None = None) -> None:
        self.modules = modules
        self.model = modules.dual_ar
        self.tokenizer = tokenizer
        self.encoder = encoder or ReferenceEncoder(modules.codec)
        c = modules.config
        self.config = c
        self.cache_shape = CacheShape(c.text.num_hidden_layers, c.text.num_key_value_heads, c.text.head_dim, min(max_len, c.text.max_seq_len))
        allowed = torch.zeros(c.text.vocab_size, dtype=torch.bool)
        allowed[c.semantic_start_token_id:c.semantic_end_token_id + 1] = True
        allowed[tokenizer.im_end] = True  # the stop token
        self.head = AllowedRowsHead(self.model.text_model.model.embeddings.weight, allowed)
        """The tied head's semantic and stop rows (nothing else can be picked; the rest are -inf): a linear of the
        slow_ar stage's (its packing and quantisation apply)."""
        self.residual_vocab = modules.codec.config.codebook_size

    @property
    def device(self) -> torch.device:
        return self.model.text_model.model.embeddings.weight.device

    def prompt(self, request: SynthesisRequest[FishSpeechInput]) -> Prompt:
        c, inputs = self.config, request.stage_input
        if inputs.ref_samples is None:
            return text_only_prompt(self.tokenizer, request.text, c.text.num_codebooks)
        if request.prepared is None:  # no PrepareStage ahead (tests): encode here
            request.prepared = self.encoder.prepare(request)
        return clone_prompt(self.tokenizer, request.text, inputs.ref_text, request.prepared, c.semantic_start_token_id)

    def start(self, request: SynthesisRequest[FishSpeechInput], payload: object = None) -> SequenceStart:
        inputs = request.stage_input
        try:
            prompt = self.prompt(request)
        except ControlTokenInText as error:
            raise InvalidField("input", "CONTROL_TOKEN_IN_TEXT", str(error)) from None
        embeds = self.model.embed(prompt.ids.to(self.device), prompt.codes.to(self.device))
        params = inputs.sampling
        seen = SeenTokens.for_params(params, self.config.text.vocab_size, self.device)
        return SequenceStart(embeds, params, SequenceState(SamplerState(inputs.sampling, stream=1), seen))

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.model.slow_cached(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[SequenceState]) -> torch.Tensor:
        c = self.config
        start = c.semantic_start_token_id
        normed = self.model.slow_output(hidden)
        logits = self.head(normed)
        first = [len(h) == 0 for h in histories]
        if any(first):  # at least one frame, so no request is silent (decided on the host: no device read)
            logits[torch.tensor(first, device=logits.device), self.tokenizer.im_end] = float("-inf")
        seen = [state.seen for state in states]
        tokens = sample_states(logits, samplers, [s.mask if s else None for s in seen])  # on the device: only the frames go to the host
        eos = tokens == self.tokenizer.im_end
        semantic = (tokens - start).clamp(0, c.text.codebook_size - 1)
        mark_seen(seen, semantic + start)  # the id the frame stands for, as the penalty reads frames back
        fast = [state.fast for state in states]

        def choose(_group: int, group_logits: torch.Tensor) -> torch.Tensor:
            return sample_states(group_logits.float(), fast)

        rest, _ = self.model.frame_codes(normed, semantic, choose, residual_vocab=self.residual_vocab)
        first_code = torch.where(eos, torch.full_like(semantic, EOS_CODE), semantic)
        return torch.cat([first_code[:, None], rest], dim=1).cpu()

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] == EOS_CODE

    def frame_embeds(self, frames: torch.Tensor, states: list[SequenceState]) -> torch.Tensor:
        frames = frames.to(self.device)
        return self.model.embed(frames[:, 0] + self.config.semantic_start_token_id, frames)
