"""The scheduling policy alone: no torch, no model."""

from __future__ import annotations

import random

import pytest

from vocalis.stages.kv_cache import SlotAllocator
from vocalis.stages.scheduler import Scheduler
from vocalis.stages.sequence import Sequence, SequenceStatus


def simulate_step(scheduler: Scheduler) -> list:
    """Apply a schedule as a stage would: compute the chunks, sample for those whose input is complete."""
    chunks = scheduler.schedule()
    for chunk in chunks:
        chunk.seq.num_computed += chunk.num_tokens
        if chunk.seq.pending == 0:
            chunk.seq.num_generated += 1
            if chunk.seq.num_generated >= chunk.seq.max_new_tokens:
                scheduler.finish(chunk.seq)
    return chunks


def test_slots_are_reused_and_freed():
    allocator = SlotAllocator(2)
    a, b = allocator.allocate(), allocator.allocate()
    assert {a, b} == {0, 1} and allocator.allocate() is None
    allocator.free(a)
    assert allocator.num_free == 1 and allocator.allocate() == a
    with pytest.raises(ValueError):
        allocator.free(5)


def test_never_more_than_max_num_seqs_and_budget():
    rng = random.Random(0)
    scheduler = Scheduler(SlotAllocator(4), max_num_seqs=4, max_num_batched_tokens=32, max_len=512)
    seqs = [Sequence(i, prompt_len=rng.randint(1, 60), max_new_tokens=rng.randint(1, 20)) for i in range(40)]
    for seq in seqs:
        scheduler.add(seq)
    steps = 0
    while scheduler.has_work:
        chunks = simulate_step(scheduler)
        steps += 1
        assert len(chunks) <= 4 and len(scheduler.running) <= 4
        assert sum(c.num_tokens for c in chunks) <= 32
        assert len({c.seq.seq_id for c in chunks}) == len(chunks)
        assert steps < 10_000
    assert all(seq.status is SequenceStatus.FINISHED and seq.num_generated == seq.max_new_tokens for seq in seqs)
    assert scheduler.allocator.num_free == 4


def test_long_prompt_is_prefilled_in_chunks_beside_decodes():
    scheduler = Scheduler(SlotAllocator(4), max_num_seqs=4, max_num_batched_tokens=16, max_len=512)
    short = Sequence(0, prompt_len=3, max_new_tokens=50)
    scheduler.add(short)
    simulate_step(scheduler)  # short prefills and samples its first token
    long = Sequence(1, prompt_len=100, max_new_tokens=5)
    scheduler.add(long)
    chunks = {c.seq.seq_id: c.num_tokens for c in simulate_step(scheduler)}
    assert chunks == {0: 1, 1: 15}  # the decode first, the prefill takes the rest of the budget
    while long.in_prefill:
        chunks = {c.seq.seq_id: c.num_tokens for c in simulate_step(scheduler)}
        assert chunks[0] == 1  # the running decode is never starved
    assert long.num_generated == 1


def test_finish_frees_the_slot_at_once_even_mid_prefill():
    scheduler = Scheduler(SlotAllocator(1), max_num_seqs=1, max_num_batched_tokens=8, max_len=512)
    first, second = Sequence(0, 40, 10), Sequence(1, 5, 2)
    scheduler.add(first)
    scheduler.add(second)
    simulate_step(scheduler)
    assert first.status is SequenceStatus.RUNNING and scheduler.allocator.num_free == 0
    scheduler.finish(first)  # a cancellation
    assert scheduler.allocator.num_free == 1 and first.slot is None
    chunks = simulate_step(scheduler)
    assert [c.seq for c in chunks] == [second]
    scheduler.finish(Sequence(9, 1, 1))  # finishing an unknown sequence is harmless


def test_too_long_is_refused():
    scheduler = Scheduler(SlotAllocator(1), max_num_seqs=1, max_num_batched_tokens=8, max_len=64)
    with pytest.raises(ValueError, match="exceeds 64"):
        scheduler.add(Sequence(0, prompt_len=60, max_new_tokens=10))
