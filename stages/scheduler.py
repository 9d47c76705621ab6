"""Which sequences run in the next step of an autoregressive stage: policy only, no tensors.

Continuous batching: sequences join and leave the running batch at every step.
Running sequences go first (a decode costs one token, an unfinished prefill a
chunk of its prompt); waiting sequences are then admitted while a cache slot,
a seat under `max_num_seqs` and token budget remain, their prompts prefilled in
chunks that fit the budget, so a long prompt never stalls the decodes beside it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vocalis.stages.kv_cache import SlotAllocator
from vocalis.stages.sequence import Sequence, SequenceStatus


@dataclass(frozen=True)
class ScheduledChunk:
    """`num_tokens` input positions of `seq`, starting at seq.num_computed, to compute this step."""

    seq: Sequence
    num_tokens: int

    @property
    def completes_input(self) -> bool:
        """Whether after this chunk the sequence's next token can be sampled."""
        return self.seq.num_computed + self.num_tokens == self.seq.length


class Scheduler:
    def __init__(self, allocator: SlotAllocator, max_num_seqs: int, max_num_batched_tokens: int, max_len: int) -> None:
        if max_num_batched_tokens < max_num_seqs:
            raise ValueError("max_num_batched_tokens must be at least max_num_seqs (one decode token each)")
        self.allocator = allocator
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_len = max_len
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        if seq.prompt_len + seq.max_new_tokens > self.max_len:
            raise ValueError(f"prompt ({seq.prompt_len}) plus max_new_tokens ({seq.max_new_tokens}) exceeds {self.max_len}")
        self.waiting.append(seq)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[ScheduledChunk]:
        budget = self.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        # Decodes first (one token each, always within budget), then unfinished prefills.
        for seq in sorted(self.running, key=lambda s: s.in_prefill):
            take = min(seq.pending, budget)
            if take > 0:
                chunks.append(ScheduledChunk(seq, take))
                budget -= take
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            slot = self.allocator.allocate()
            if slot is None:
                break
            seq = self.waiting.popleft()
            seq.slot = slot
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            take = min(seq.pending, budget)
            chunks.append(ScheduledChunk(seq, take))
            budget -= take
        return chunks

    def finish(self, seq: Sequence) -> None:
        """Remove `seq` (done, cancelled or failed) and free its slot at once."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
            self.allocator.free(seq.slot)  # type: ignore[arg-type]
            seq.slot = None
        elif seq in self.waiting:
            self.waiting.remove(seq)
        seq.status = SequenceStatus.FINISHED
