"""AutoregressiveStage: sequences that persist across steps, continuously batched over a paged KV cache.

The model supplies tensors (prompt embeddings, one forward over the flattened
tokens of a step, frame sampling, EOS); the Scheduler decides who runs and keeps
the books (torch-free); the PagedKVCache holds the memory. This file is the loop
that ties them; a sequence's tensors and the handover to the next stage are
sequence_tensors.py's, the rule of prompt against cache room prompt_room.py's.
Every tensor it makes is on the cache's device; only the EOS flags of a step
cross to the host (frames leave as device tensors).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence as Sizes
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from vocalis.stages.api.errors import SynthesisFailed
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.block_manager import SlotManager, StateShape
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.decode_graphs import DecodeGraphs
from vocalis.stages.runtime.kv_cache import CacheShape, PagedKVCache, SlotKVCache, kv_cache_budget
from vocalis.stages.runtime.linear_attention import RecurrentStates
from vocalis.stages.runtime.prompt_room import fit_prompt
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams
from vocalis.stages.runtime.scheduler import Scheduler
from vocalis.stages.runtime.sequence import FinishReason, Sequence
from vocalis.stages.runtime.sequence_tensors import SequenceTensors
from vocalis.stages.runtime.stage import CacheStats, Stage, StageItem


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
    fed_positions: int = 0
    """Input positions the model feeds in during generation, one with each generated frame, after the prompt
    (Qwen3-TTS's text in its streaming layout): the whole input must fit the cache with room for a frame after it."""


class AutoregressiveModel(Protocol):
    """The tensor side of an autoregressive stage (e.g. a TTS talker emitting codec frames)."""

    cache_shape: CacheShape
    state_shape: StateShape | None = None
    """The per-sequence recurrent state of linear-attention layers (Gated DeltaNet), or None (a model of attention
    layers only). The stage keeps one slot per seat beside the KV cache, as `cache.states`."""
    emits_eos_frame: bool
    """False: the frame `is_eos` flags ends its sequence and is not emitted (an EOS code). True: it is the
    sequence's last output (a stop head deciding beside a real frame)."""
    forward_takes_states: bool = False
    """True: `forward` also gets `states=`, each chunk's `SequenceStart.state` in batch order (see `forward`)."""

    def start(self, request: SynthesisRequest, payload: object = None) -> SequenceStart:
        """The prompt, sampling and state of a new request, on the stage's thread: heavy per-request
        conditioning (encoding a reference clip) belongs here. `payload`: the stage before's output (a PrepareStage's
        conditioning, say), None at stage 0. May raise: that request fails alone."""
        ...

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        """Hidden states [T, H] of the flattened step tokens, writing their keys/values into the cache. A model that
        sets `forward_takes_states = True` also gets `states=`: each chunk's `SequenceStart.state`, in batch order
        (a sub-model with its own per-sequence cache that must see every prefill position, as Drama 3's tower)."""
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

    def first_chunk_frames(self, request: SynthesisRequest) -> int | None:
        """Frames of the next stage's first chunk for `request` (its `initial_codec_chunk_frames`, which the next
        stage reads too), or None: the handover policy's own."""
        return None

    def caches(self) -> dict[str, CacheStats]:
        """The model's caches of reusable work by name (its reference clips' encodings), for the metrics; none by
        default."""
        return {}


class CacheFull(SynthesisFailed):
    """A sequence outgrew the KV-cache budget with the whole cache to itself."""


class AutoregressiveStage(Stage):
    """Runs an AutoregressiveModel. A model whose stop decision comes beside a real frame (a stop head,
    rather than an EOS code) sets `emits_eos_frame = True`: that frame is its sequence's last output.

    KV memory is a budget (`kv_cache_bytes`, or `kv_cache_fraction` of the device's memory; by default
    room for `max_num_seqs` sequences of the model's max_len) cut into blocks of `block_size` positions. On CPU the
    budget is reserved at start and becomes resident as blocks are first used (kv_cache.py).
    A request may set its first chunk (`AutoregressiveModel.first_chunk_frames`), as the next stage reads it.

    A model with linear-attention layers (`state_shape`) gets `max_num_seqs` recurrent-state slots beside the KV
    cache: a sequence takes one when admitted, it is zeroed when the sequence computes position 0 (first chunk, or
    the recompute after a preemption), every step updates the slots of its sequences in place (so chunked prefill
    carries the state over), and it is given back with the blocks on finish, cancel or preemption."""

    def __init__(
        self,
        name: str,
        model: AutoregressiveModel,
        max_num_seqs: int = 16,
        max_num_batched_tokens: int = 2048,
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
        kv_cache_bytes: int = 0,
        kv_cache_fraction: float = 0.0,
        block_size: int = 16,
        handover: ChunkPolicy | None = None,
        cuda_graph_batch_sizes: Sizes[int] = (),
        graph_capture: bool | None = None,
    ) -> None:
        self.name = name
        self.model = model
        shape = model.cache_shape
        budget = kv_cache_budget(shape, dtype, device, max_num_seqs, kv_cache_bytes, kv_cache_fraction)
        self.cache = PagedKVCache.from_budget(shape, budget, block_size, dtype=dtype, device=device)
        self.device = self.cache.device
        state_shape = model.state_shape
        slots = None
        if state_shape is not None:
            self.cache.states = RecurrentStates(state_shape, max_num_seqs, dtype=dtype, device=device)
            slots = SlotManager(max_num_seqs)
        self.handover = handover
        """The next stage's chunking: frames are handed over when its next chunk can be decoded (or the sequence
        ends), not every step, so the next stage wakes once per chunk. None: every frame at once."""
        self.graphs: DecodeGraphs | None = None
        """Decode-only steps on static buffers padded to `cuda_graph_batch_sizes` (captured as CUDA graphs on a GPU;
        `graph_capture=False` runs the same buffers eagerly). Not for models with recurrent state."""
        if cuda_graph_batch_sizes and state_shape is None:
            self.graphs = DecodeGraphs(model.forward, self.cache, cuda_graph_batch_sizes, shape.max_len, graph_capture)
        self.scheduler = Scheduler(self.cache.blocks, max_num_seqs, max_num_batched_tokens, shape.max_len, slots)
        self._sequences: dict[int, Sequence[SequenceTensors]] = {}  # by id(request)
        self._ids = itertools.count()
        self._batch: list[SynthesisRequest] = []
        self.steps = 0
        self._emits_eos_frame = model.emits_eos_frame
        self._next: tuple[torch.Tensor, list[Sequence[SequenceTensors]]] | None = None
        """The last step's frame embeddings [B, H] and the sequences of its rows (see `_step_inputs`)."""
        self._kept = False
        """The last step was an eager decode-only step whose every sequence goes on: if this one decodes the same
        rows, the cache's kept decode context continues (see PagedKVCache.batch)."""

    # -- the Stage protocol -------------------------------------------------------------

    def add(self, item: StageItem) -> None:
        request = item.request
        start = self.model.start(request, item.payload)
        prompt, state = start.prompt_embeds, start.state
        params = fit_prompt(self.name, self.scheduler.max_len, self.cache.blocks.capacity, request, prompt.shape[0],
                            start.fed_positions, start.sampling)
        data = SequenceTensors(prompt=prompt, sampler=SamplerState(params), state=state, max_frames=params.max_new_tokens)
        seq = Sequence(next(self._ids), prompt_len=prompt.shape[0], max_new_tokens=params.max_new_tokens, request=request, data=data)
        self.scheduler.add(seq)
        self._sequences[id(request)] = seq

    def has_work(self) -> bool:
        return self.scheduler.has_work

    def batch_requests(self) -> list[SynthesisRequest]:
        return list(self._batch)

    def caches(self) -> dict[str, CacheStats]:
        return self.model.caches()

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
        self._fail_out_of_memory()
        self._batch = [chunk.seq.request for chunk in chunks]
        if not chunks:
            self._next = None
            return []
        seqs_in = [chunk.seq for chunk in chunks]
        decode_only = all(chunk.num_tokens == 1 and chunk.seq.num_computed >= chunk.seq.prompt_len for chunk in chunks)
        same_rows = decode_only and self._continues(seqs_in)
        embeds = self._next[0] if same_rows else self._step_inputs(chunks)
        context_kept, self._kept = self._kept, False
        slots = None
        if self.cache.states is not None:
            slots = [seq.state_slot for seq in seqs_in]
            fresh = [seq.state_slot for seq in seqs_in if seq.num_computed == 0]
            if fresh:
                self.cache.states.reset(torch.tensor(fresh, device=self.device))
        tables, starts = [seq.block_table for seq in seqs_in], [seq.num_computed for seq in seqs_in]
        takes_states = self.model.forward_takes_states
        use_graphs = self.graphs is not None and decode_only and not takes_states
        hidden = self.graphs.run(embeds, tables, starts) if use_graphs else None
        if hidden is None:
            batch = self.cache.batch(tables, starts, [c.num_tokens for c in chunks], slots, continues=context_kept and same_rows)
            if takes_states:
                hidden = self.model.forward(embeds, batch, self.cache, states=[seq.data.state for seq in seqs_in])
            else:
                hidden = self.model.forward(embeds, batch, self.cache)
        seqs = self.scheduler.advance(chunks)
        self.steps += 1
        if not seqs:
            self._next = None
            return []
        if decode_only or all(chunk.num_tokens == 1 for chunk in chunks) and len(seqs) == len(chunks):
            last_hidden = hidden  # one token per sequence, every one sampled: rows already in order
        else:
            ends = list(itertools.accumulate(c.num_tokens for c in chunks))
            last_token = {id(chunk.seq): end - 1 for chunk, end in zip(chunks, ends, strict=True)}
            last_hidden = hidden[torch.tensor([last_token[id(seq)] for seq in seqs], device=hidden.device)]
        data = [seq.data for seq in seqs]
        frames = self.model.sample_frames(last_hidden, [d.sampler for d in data], [d.history() for d in data], [d.state for d in data])
        eos = self.model.is_eos(frames).tolist()
        reasons = self.scheduler.postprocess(seqs, eos)
        rows = frames.unbind(0)  # one call for every sequence's [K] view
        outputs = []
        continuing: list[Sequence[SequenceTensors]] = []
        for frame, seq, reason in zip(rows, seqs, reasons, strict=True):
            request = seq.request
            emitted = reason is not FinishReason.EOS or self._emits_eos_frame
            if emitted:
                seq.data.append_frame(frame)
                request.output_tokens += 1
            finished = reason is not None
            if self.handover is None:
                outputs.append(StageItem(request, frame[None] if emitted else frames[:0], finished=finished))
            elif finished or self._chunk_due(seq.data, request):
                outputs.append(StageItem(request, seq.data.release(frame[None]), finished=finished))
            if finished:
                self._sequences.pop(id(request), None)
            else:
                continuing.append(seq)
        self._next = None
        if continuing:
            kept = frames if len(continuing) == len(seqs) else frames[
                torch.tensor([i for i, r in enumerate(reasons) if r is None], device=frames.device)]
            next_embeds = self.model.frame_embeds(kept, [seq.data.state for seq in continuing])
            for i, seq in enumerate(continuing):
                seq.data.frame_embeds.append((next_embeds, i))
            self._next = (next_embeds, continuing)
            self._kept = decode_only and not use_graphs and len(continuing) == len(seqs_in)
        return outputs

    def _continues(self, seqs: list[Sequence[SequenceTensors]]) -> bool:
        """Whether `seqs` are exactly the sequences that continued from the last step, in the same order (the steady
        state): a decode-only step of them reuses that step's frame embeddings as they are."""
        following = self._next
        return following is not None and len(following[1]) == len(seqs) and all(
            a is b for a, b in zip(following[1], seqs, strict=True)
        )

    @staticmethod
    def _step_inputs(chunks: list) -> torch.Tensor:
        """The flattened input embeddings of a step, read from each sequence's prompt and frame embeddings."""
        return torch.cat([chunk.seq.data.inputs(chunk.seq.num_computed, chunk.num_tokens) for chunk in chunks])

    def _chunk_due(self, data: SequenceTensors, request: SynthesisRequest) -> bool:
        """Whether the next stage can decode a new chunk of this sequence's frames now."""
        if data.num_frames < data.due_at:
            return False  # most steps: known without asking the policy
        assert self.handover is not None
        return data.chunk_due(self.handover, self.model.first_chunk_frames(request))

    def _fail_out_of_memory(self) -> None:
        for seq in self.scheduler.out_of_memory:
            self._sequences.pop(id(seq.request), None)
            blocks = self.cache.blocks
            seq.request.fail(
                CacheFull(
                    f"{self.name}: the sequence needs more than the KV cache's {blocks.capacity} positions "
                    f"({blocks.num_blocks} blocks of {blocks.block_size}, {self.cache.bytes} bytes) after "
                    f"{seq.num_generated} frames; raise kv_cache_bytes or lower max_new_tokens"
                )
            )
