"""AutoregressiveStage: sequences that persist across steps, continuously batched over a slot KV cache.

The model supplies tensors (prompt embeddings, one forward over the flattened
tokens of a step, frame sampling, EOS); the Scheduler decides who runs; the
SlotKVCache holds the memory. This file is the loop that ties them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from vocalis.stages.attention import AttentionBatch
from vocalis.stages.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.request import SynthesisRequest
from vocalis.stages.sampling import SamplerState, SamplingParams
from vocalis.stages.scheduler import Scheduler
from vocalis.stages.sequence import Sequence
from vocalis.stages.stage import StageItem


@dataclass
class SequenceStart:
    """How a request's sequence starts, made in one call by `AutoregressiveModel.start`."""

    prompt_embeds: torch.Tensor
    """[P, H] input embeddings of the prompt (its text and stage input)."""
    sampling: SamplingParams
    """Sampling of the sequence; its max_new_tokens caps the frames."""
    state: Any = None
    """What the sequence carries between steps besides the runtime's own (text still to feed in, a
    sub-model's sampler, a step count), as the model defines; handed back to `sample_frames` and
    `frame_embeds` in batch order. None for a model that needs none."""


class AutoregressiveModel(Protocol):
    """The tensor side of an autoregressive stage (e.g. a TTS talker emitting codec frames)."""

    cache_shape: CacheShape
    emits_eos_frame: bool
    """False: the frame `is_eos` flags ends its sequence and is not emitted (an EOS code). True: it is the
    sequence's last output (a stop head deciding beside a real frame)."""

    def start(self, request: SynthesisRequest) -> SequenceStart:
        """The prompt, sampling and state of a new request, on the stage's thread: heavy per-request
        conditioning (encoding a reference clip) belongs here. May raise: that request fails alone."""
        ...

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Hidden states [T, H] of the flattened step tokens, writing their keys/values into the cache."""
        ...

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[Any]) -> torch.Tensor:
        """Next frames [B, K] from last-token hidden states [B, H]; histories[i] is [n_i, K] generated so far,
        states[i] the sequence's `SequenceStart.state`."""
        ...

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        """[B] bool: frame i ends its sequence (see `emits_eos_frame`)."""
        ...

    def frame_embeds(self, frames: torch.Tensor, states: list[Any]) -> torch.Tensor:
        """[B, H] input embeddings of generated frames [B, K] (states in the same order)."""
        ...


class AutoregressiveStage:
    """Runs an AutoregressiveModel."""

    def __init__(
        self,
        name: str,
        model: AutoregressiveModel,
        max_num_seqs: int = 16,
        max_num_batched_tokens: int = 2048,
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
    ) -> None:
        self.name = name
        self.model = model
        self.cache = SlotKVCache(model.cache_shape, max_num_seqs, dtype=dtype, device=device)
        self.scheduler = Scheduler(self.cache.allocator, max_num_seqs, max_num_batched_tokens, model.cache_shape.max_len)
        self._sequences: dict[int, Sequence] = {}  # by id(request)
        self._ids = itertools.count()
        self._batch: list[SynthesisRequest] = []
        self.steps = 0
        self._emits_eos_frame = model.emits_eos_frame

    # -- the Stage protocol -------------------------------------------------------------

    def add(self, item: StageItem) -> None:
        request = item.request
        start = self.model.start(request)
        prompt, params = start.prompt_embeds, start.sampling
        seq = Sequence(next(self._ids), prompt_len=prompt.shape[0], max_new_tokens=params.max_new_tokens, request=request)
        seq.data.update(prompt=prompt, sampler=SamplerState(params), frames=[], next_embed=None, state=start.state)
        self.scheduler.add(seq)
        self._sequences[id(request)] = seq

    def has_work(self) -> bool:
        return self.scheduler.has_work

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def active_requests(self) -> list[SynthesisRequest]:
        return [seq.request for seq in self._sequences.values()]

    def drop(self, request: SynthesisRequest) -> None:
        seq = self._sequences.pop(id(request), None)
        if seq is not None:
            self.scheduler.finish(seq)

    def drop_closed(self) -> None:
        for seq in list(self._sequences.values()):
            if seq.request.closed:
                self.drop(seq.request)

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        chunks = self.scheduler.schedule()
        self._batch = [chunk.seq.request for chunk in chunks]
        if not chunks:
            return []
        embeds = []
        for chunk in chunks:
            seq = chunk.seq
            if seq.in_prefill:
                embeds.append(seq.data["prompt"][seq.num_computed : seq.num_computed + chunk.num_tokens])
            else:
                embeds.append(seq.data["next_embed"])
        batch = AttentionBatch.build(
            [chunk.seq.slot for chunk in chunks], [chunk.seq.num_computed for chunk in chunks], [c.num_tokens for c in chunks]
        )
        hidden = self.model.forward(torch.cat(embeds), batch, self.cache)
        ends = list(itertools.accumulate(c.num_tokens for c in chunks))
        for chunk in chunks:
            chunk.seq.num_computed += chunk.num_tokens
        ready = [i for i, chunk in enumerate(chunks) if chunk.seq.pending == 0]
        self.steps += 1
        if not ready:
            return []
        seqs = [chunks[i].seq for i in ready]
        last_hidden = hidden[torch.tensor([ends[i] - 1 for i in ready])]
        histories = [_history(seq) for seq in seqs]
        states = [seq.data["state"] for seq in seqs]
        frames = self.model.sample_frames(last_hidden, [seq.data["sampler"] for seq in seqs], histories, states)
        eos = self.model.is_eos(frames).tolist()
        outputs = []
        continuing = []
        for row, seq in enumerate(seqs):
            seq.num_generated += 1
            request = seq.request
            frame = frames[row : row + 1]
            if eos[row]:
                if self._emits_eos_frame:
                    seq.data["frames"].append(frame)
                    request.output_tokens += 1
                outputs.append(StageItem(request, frame if self._emits_eos_frame else frame[:0], finished=True))
                self.drop(request)
                continue
            seq.data["frames"].append(frame)
            request.output_tokens += 1
            finished = seq.num_generated >= seq.max_new_tokens
            outputs.append(StageItem(request, frame, finished=finished))
            if finished:
                self.drop(request)
            else:
                continuing.append((row, seq))
        if continuing:
            rows = torch.tensor([row for row, _ in continuing])
            next_embeds = self.model.frame_embeds(frames[rows], [seq.data["state"] for _, seq in continuing])
            for i, (_, seq) in enumerate(continuing):
                seq.data["next_embed"] = next_embeds[i : i + 1]
        return outputs


def _history(seq: Sequence) -> torch.Tensor:
    frames = seq.data["frames"]
    if not frames:
        return torch.empty(0, 0, dtype=torch.long)
    return torch.cat(frames)
