"""Which sequences run in the next step of an autoregressive stage, and what a step's result means for them.

Policy and bookkeeping only, no tensors and no torch. Continuous batching:
sequences join and leave the running batch at every step. Running sequences go
first (a decode costs one token, an unfinished prefill a chunk of its prompt);
waiting sequences are then admitted while a seat under `max_num_seqs`, token
budget and KV blocks remain, their prompts prefilled in chunks that fit, so a
long prompt never stalls the decodes beside it.

Memory follows the blocks: a running sequence that needs a block when none is
free preempts the most recently admitted sequence (its blocks are freed and it is
recomputed from its prompt and generated frames later, so nothing is corrupted);
a sequence that cannot grow even with the whole cache to itself is finished with
FinishReason.CACHE_FULL.

A model with linear-attention layers also keeps a fixed-size recurrent state per sequence: the scheduler then holds
a SlotManager with one slot per seat (`max_num_seqs`), gives a sequence a slot when it is admitted and takes it back
whenever its blocks go (finish, cancel, preemption), so slots and blocks always travel together.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vocalis.stages.runtime.block_manager import BlockManager, SlotManager
from vocalis.stages.runtime.sequence import FinishReason, Sequence, SequenceStatus


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
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_num_batched_tokens: int, max_len: int,
                 slots: SlotManager | None = None) -> None:
        if max_num_batched_tokens < max_num_seqs:
            raise ValueError("max_num_batched_tokens must be at least max_num_seqs (one decode token each)")
        if slots is not None and slots.num_slots < max_num_seqs:
            raise ValueError(f"{slots.num_slots} recurrent-state slots cannot seat max_num_seqs={max_num_seqs} sequences")
        self.blocks = blocks
        self.slots = slots
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_len = max_len
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        """In admission order: the last is the first preempted."""
        self.num_preemptions = 0
        self.out_of_memory: list[Sequence] = []
        """Finished with CACHE_FULL by the last schedule(); the stage tells their requests why."""

    def add(self, seq: Sequence) -> None:
        """Queue `seq`, which its stage has fitted to the cache (prompt_room.fit_prompt: its prompt leaves room and
        prompt plus max_new_tokens is within max_len)."""
        self.waiting.append(seq)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[ScheduledChunk]:
        self.out_of_memory = []
        budget = self.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        scheduled: set[int] = set()
        preemptions_before = self.num_preemptions
        block_size = self.blocks.block_size
        # Decodes first (one token each, always within budget), then unfinished prefills.
        decodes: list[Sequence] = []
        prefills: list[Sequence] = []
        for seq in self.running:
            (prefills if seq.prompt_len + seq.num_generated - seq.num_computed > 1 else decodes).append(seq)
        for seq in decodes + prefills:
            if seq.status is not SequenceStatus.RUNNING or budget == 0:
                continue  # preempted earlier in this loop
            wanted = min(seq.prompt_len + seq.num_generated - seq.num_computed, budget)
            if wanted == 1 and seq.num_computed < len(seq.block_table) * block_size:
                take = 1  # a decode with room in its last block (the steady state): nothing to grow
            else:
                take = self._fit(seq, wanted, scheduled)
            if take > 0:
                chunks.append(ScheduledChunk(seq, take))
                scheduled.add(id(seq))
                budget -= take
        preempted = self.num_preemptions != preemptions_before
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            # keep one block per running sequence in reserve, so admitting never forces a preemption next step
            spare = self.blocks.num_free - len(self.running)
            take = min(seq.pending, budget, spare * self.blocks.block_size)
            if take < min(seq.pending, budget, self.blocks.block_size):
                break
            self.waiting.popleft()
            self.blocks.grow(seq.block_table, seq.num_computed + take)
            if self.slots is not None:
                seq.state_slot = self.slots.take()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            chunks.append(ScheduledChunk(seq, take))
            scheduled.add(id(seq))
            budget -= take
        return chunks

    def _fit(self, seq: Sequence, wanted: int, scheduled: set[int]) -> int:
        """Grow `seq`'s blocks for up to `wanted` positions, preempting others as needed; the positions it got.

        A prefill chunk leaves one free block per other running sequence and, when that leaves it nothing
        while others progress this step, waits instead of preempting: decodes keep their pace.
        """
        if seq.in_prefill and scheduled:
            spare = self.blocks.num_free - (len(self.running) - 1)
            room = (len(seq.block_table) + max(0, spare)) * self.blocks.block_size - seq.num_computed
            if room < 1:
                return 0
            take = min(wanted, room)
            self.blocks.grow(seq.block_table, seq.num_computed + take)
            return take
        while True:
            room = (len(seq.block_table) + self.blocks.num_free) * self.blocks.block_size - seq.num_computed
            if room >= 1:
                take = min(wanted, room)
                self.blocks.grow(seq.block_table, seq.num_computed + take)
                return take
            victim = next((s for s in reversed(self.running) if s is not seq and id(s) not in scheduled), None)
            if victim is not None:
                self.preempt(victim)
            elif any(s is not seq for s in self.running):
                self.preempt(seq)  # the others are in this step already; try again when they free blocks
                return 0
            else:
                self.out_of_memory.append(seq)
                self.finish(seq, FinishReason.CACHE_FULL)
                return 0

    def preempt(self, seq: Sequence) -> None:
        """Free `seq`'s blocks and queue it first, to be recomputed from position 0."""
        self.running.remove(seq)
        self.blocks.release(seq.block_table)
        self._give_slot(seq)
        seq.num_computed = 0
        seq.num_preemptions += 1
        self.num_preemptions += 1
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)

    def advance(self, chunks: list[ScheduledChunk]) -> list[Sequence]:
        """Record that the chunks were computed; the sequences whose next token is now to be sampled."""
        ready = []
        for chunk in chunks:
            seq = chunk.seq
            seq.num_computed += chunk.num_tokens
            if seq.num_computed == seq.prompt_len + seq.num_generated:
                ready.append(seq)
        return ready

    def postprocess(self, seqs: list[Sequence], eos: list[bool]) -> list[FinishReason | None]:
        """Record one sampled token for each of `seqs` (eos[i]: the model ended seqs[i]); finish those that are done.

        Returns each sequence's finish reason, None for those that go on.
        """
        reasons: list[FinishReason | None] = []
        for seq, ended in zip(seqs, eos, strict=True):
            seq.num_generated += 1
            reason = FinishReason.EOS if ended else FinishReason.LENGTH if seq.num_generated >= seq.max_new_tokens else None
            if reason is not None:
                self.finish(seq, reason)
            reasons.append(reason)
        return reasons

    def finish(self, seq: Sequence, reason: FinishReason = FinishReason.ABORTED) -> None:
        """Remove `seq` (done, cancelled or failed) and free its blocks at once."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        if seq.block_table:
            self.blocks.release(seq.block_table)
        self._give_slot(seq)
        if seq.status is not SequenceStatus.FINISHED:
            seq.finish_reason = reason
        seq.status = SequenceStatus.FINISHED

    def _give_slot(self, seq: Sequence) -> None:
        if self.slots is not None and seq.state_slot is not None:
            self.slots.give(seq.state_slot)
            seq.state_slot = None
