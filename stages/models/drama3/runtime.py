"""Drama 3 on the runtime: the backbone continuously batched over the paged KV cache and recurrent states, and the
codebook tower filling in each frame inside the step (an AutoregressiveModel whose frames are the codec's K codes).

The tower attends over the whole sequence, so each sequence carries its own tower cache (`TowerKV`) and its frame
rows in its state, and the stage hands `forward` the states of its chunks (`forward_takes_states`): prompt rows whose
next frame is known (all but the last) fill the tower cache right after the backbone, in every prefill chunk; the
step's sampling then runs the tower at each sequence's newest row. After a preemption the recompute refills it.

Sampling, as the reference server does it: the main token from the lm_head rows of end-of-speech and the semantic
band (temperature, top-k, top-p of the request), with a second draw (temperature 1, top-p 0.95, top-k 30) when a
semantic pick repeats one of the last 16 main tokens; each code from its head with top-k capped at 30, on its own
seeded stream. End of speech is never drawn for the first frame, so no request is silent. All of it runs on the model's
device, batched over the step's sequences, each draw from its request's generator; only the emitted frames go to the host.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.drama3.modules import Drama3
from vocalis.stages.models.drama3.prompt import PromptTextError, Reference, build_prompt
from vocalis.stages.models.drama3.tower import RowGroup, TowerKV
from vocalis.stages.models.fish_common.codec import ClipInput
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.prepare import Preparer
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, redraw_repeats, sample_states
from vocalis.stages.runtime.stage import CacheStats

EOS_CODE = -1
"""Code 0 of the frame that ends a sequence (end of speech drawn); never emitted."""
RAS_WINDOW = 16
RAS = SamplingParams(temperature=1.0, top_k=30, top_p=0.95)
CODEBOOK_TOP_K = 30


@dataclass(frozen=True, eq=False)
class ReferenceClip:
    """A further voice to clone: mono float32 samples at `rate`, and the transcript."""

    samples: np.ndarray
    rate: int
    text: str


@dataclass(frozen=True, eq=False)
class Drama3Input(ClipInput):
    """Stage-0 input of a session, made by the adapter: the lineage's, and further voices to clone."""

    more_references: tuple[ReferenceClip, ...] = ()
    """Further voices after the first (each its own `[Reference i]` block of the prompt)."""


class ReferenceFrames(Preparer):
    """The Preparer of the pipeline's first stage: every reference clip of a request to codec frames [F, K], with
    S2 Pro's reference encoder (resampling, content cache), on the PrepareStage's thread."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder

    def caches(self) -> dict[str, CacheStats]:
        return self.encoder.caches()

    def costly(self, request: SynthesisRequest[Drama3Input]) -> bool:
        return not all(self.encoder.cached(samples, rate) for samples, rate in _clips(request.stage_input))

    def prepare(self, request: SynthesisRequest[Drama3Input]) -> list[torch.Tensor] | None:
        clips = _clips(request.stage_input)
        return [self.encoder.encode(samples, rate) for samples, rate in clips] if clips else None


def _clips(inputs: Drama3Input) -> list[tuple[np.ndarray, int]]:
    """A request's reference clips with their rates (none when it clones no voice)."""
    if inputs.ref_samples is None:
        return []
    return [(inputs.ref_samples, inputs.ref_rate), *((clip.samples, clip.rate) for clip in inputs.more_references)]


@dataclass
class Drama3Sequence:
    rows: torch.Tensor
    """[n, 1 + K] the frame rows at positions 0..n-1: the prompt's, then each generated frame's."""
    kv: TowerKV
    codes: SamplerState
    recent: torch.Tensor
    """[RAS_WINDOW] the candidate indices of the last main tokens drawn (-1 before the first), on the device."""
    sampled: int = 0
    """Frames sampled so far."""
    computed: int = 0
    """Positions the backbone has computed (the newest row is computed - 1)."""


class Drama3Talker(AutoregressiveModel):
    emits_eos_frame = False
    forward_takes_states = True

    def __init__(self, model: Drama3, tokenizer: Tokenizer, max_len: int, encoder) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.config = model.config
        self.cache_shape = model.backbone.cache_shape(max_len)
        self.state_shape = model.backbone.state_shape()
        self._eos_column = int((model.candidates == model.config.eos_token_id).nonzero()[0, 0])

    @property
    def device(self) -> torch.device:
        return self.model.lm_head.weight.device

    def start(self, request: SynthesisRequest[Drama3Input], payload: object = None) -> SequenceStart:
        inputs, c = request.stage_input, self.config
        references = []
        if inputs.ref_samples is not None:
            if request.prepared is None:  # no PrepareStage ahead (tests): encode here
                request.prepared = self.encoder.prepare(request)
            texts = [inputs.ref_text, *(clip.text for clip in inputs.more_references)]
            references = [Reference(text, codes) for text, codes in zip(texts, request.prepared, strict=True)]
        try:
            rows = build_prompt(self.tokenizer, request.text, references, c.decoder.num_codebooks, c.decoder.vocab_size,
                                reference_field="ref_text" if len(references) == 1 else "references")
        except PromptTextError as error:
            raise InvalidField(error.where, "INVALID_VALUE", str(error)) from None
        params = inputs.sampling
        codes = dataclasses.replace(inputs.sampling, top_k=min(inputs.sampling.top_k or CODEBOOK_TOP_K, CODEBOOK_TOP_K),
                                    repetition_penalty=1.0)
        embeds = self.model.embed_rows(rows.to(self.device))
        weight = self.model.lm_head.weight
        state = Drama3Sequence(rows.to(weight.device), self.model.tower.new_cache(weight.dtype, weight.device), SamplerState(codes, stream=1),
                               torch.full((RAS_WINDOW,), -1, dtype=torch.long, device=weight.device))
        return SequenceStart(embeds, params, state)

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: PagedKVCache,
                states: list[Drama3Sequence] | None = None) -> torch.Tensor:
        hidden = self.model.backbone.cached(embeds, batch, cache)
        if states is not None:
            self._prefill_tower(hidden, batch, states)
        return hidden

    def _prefill_tower(self, hidden: torch.Tensor, batch: AttentionBatch, states: list[Drama3Sequence]) -> None:
        """Tower rows of this step's tokens whose next frame the sequence already holds."""
        parts, groups, offset = [], [], 0
        for state, start, count in zip(states, batch.start_positions, batch.query_lens, strict=True):
            state.kv.truncate(start)
            known = max(0, min(start + count, len(state.rows) - 1) - start)
            if known:
                parts.append((hidden[offset : offset + known], torch.arange(start, start + known, device=hidden.device),
                              state.rows[start : start + known], state.rows[start + 1 : start + known + 1]))
                groups.append(RowGroup(state.kv, start, known))
            state.computed = start + count
            offset += count
        if not groups:
            return
        device = hidden.device
        h, positions, inputs, nexts = (torch.cat([p[i] for p in parts]).to(device) for i in range(4))
        self.model.tower.run(h, positions, inputs, nexts[:, 0], groups, next_frames=nexts)

    def _main_tokens(self, hidden: torch.Tensor, samplers: list[SamplerState], states: list[Drama3Sequence]) -> torch.Tensor:
        """Main tokens [B] on the device: the request's draw, then the repeat-redraw rule over the last picks."""
        device = hidden.device
        logits = self.model.candidate_logits(hidden)
        first = torch.tensor([s.sampled == 0 for s in states], device=device)
        logits[:, self._eos_column] = logits[:, self._eos_column].masked_fill(first, float("-inf"))
        picks = sample_states(logits, samplers)
        picks = redraw_repeats(logits, picks, torch.stack([s.recent for s in states]), samplers, RAS,
                               exempt=picks == self._eos_column)
        recent = torch.cat([torch.stack([s.recent for s in states])[:, 1:], picks[:, None]], dim=1)
        for state, row in zip(states, recent.unbind(0), strict=True):
            state.recent = row
            state.sampled += 1
        return self.model.candidates[picks]

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[Drama3Sequence]) -> torch.Tensor:
        """Frames [B, K] on the host (the one crossing of a step); sampling and the frame rows stay on the device."""
        mains = self._main_tokens(hidden, samplers, states)
        device = hidden.device
        code_samplers = [s.codes for s in states]

        def choose(_j: int, logits: torch.Tensor) -> torch.Tensor:
            return sample_states(logits, code_samplers)

        newest = [s.computed - 1 for s in states]
        codes = self.model.tower.run(
            hidden, torch.tensor(newest, device=device), torch.stack([s.rows[p] for s, p in zip(states, newest, strict=True)]),
            mains, [RowGroup(s.kv, p, 1) for s, p in zip(states, newest, strict=True)], choose=choose,
        )
        rows = torch.cat([mains[:, None], codes], dim=1).to(states[0].rows.dtype)
        for state, row in zip(states, rows.unbind(0), strict=True):
            state.rows = torch.cat([state.rows, row[None]])
        frames = codes.masked_fill((mains == self.config.eos_token_id)[:, None] & (torch.arange(codes.shape[1], device=device) == 0), EOS_CODE)
        return frames.cpu()

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] == EOS_CODE

    def frame_embeds(self, frames: torch.Tensor, states: list[Drama3Sequence]) -> torch.Tensor:
        frames = frames.to(self.device)
        return self.model.embed_rows(torch.cat([frames[:, :1] + self.config.semantic_start_token_id, frames], dim=1))
