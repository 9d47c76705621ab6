"""The scheduling policy and its KV-block bookkeeping alone: no torch, no model."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest

from vocalis.stages.runtime.block_manager import BlockManager
from vocalis.stages.runtime.scheduler import Scheduler
from vocalis.stages.runtime.sequence import FinishReason, Sequence, SequenceStatus


def simulate_step(scheduler: Scheduler, eos_at: dict[int, int] | None = None) -> list:
    """Apply a schedule as a stage would: compute the chunks, sample for those whose input is complete."""
    chunks = scheduler.schedule()
    for chunk in chunks:  # the chunk's positions have blocks to be written to
        assert len(chunk.seq.block_table) * scheduler.blocks.block_size >= chunk.seq.num_computed + chunk.num_tokens
    ready = scheduler.advance(chunks)
    eos_at = eos_at or {}
    scheduler.postprocess(ready, [eos_at.get(seq.seq_id) == seq.num_generated + 1 for seq in ready])
    return chunks


def test_blocks_are_reused_and_freed():
    blocks = BlockManager(4, block_size=8)
    a: list[int] = []
    blocks.grow(a, 17)  # 17 positions need 3 blocks
    assert len(a) == 3 and blocks.num_free == 1
    assert not blocks.can_grow(a, 33) and blocks.can_grow(a, 32)
    with pytest.raises(MemoryError):
        blocks.grow([], 9)
    blocks.release(a)
    assert a == [] and blocks.num_free == 4
    with pytest.raises(ValueError):
        blocks.release([2])


def test_never_more_than_max_num_seqs_and_budget():
    rng = random.Random(0)
    scheduler = Scheduler(BlockManager(64, 16), max_num_seqs=4, max_num_batched_tokens=32, max_len=512)
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
    assert all(seq.finish_reason is FinishReason.LENGTH for seq in seqs)
    assert scheduler.blocks.num_free == 64


def test_eos_and_max_tokens_finish_and_free_blocks():
    scheduler = Scheduler(BlockManager(8, 4), max_num_seqs=2, max_num_batched_tokens=16, max_len=64)
    talker, capped = Sequence(0, prompt_len=5, max_new_tokens=20), Sequence(1, prompt_len=3, max_new_tokens=4)
    scheduler.add(talker)
    scheduler.add(capped)
    while scheduler.has_work:
        simulate_step(scheduler, eos_at={0: 7})
    assert (talker.num_generated, talker.finish_reason) == (7, FinishReason.EOS)
    assert (capped.num_generated, capped.finish_reason) == (4, FinishReason.LENGTH)
    assert scheduler.blocks.num_free == 8 and not talker.block_table


def test_memory_follows_positions_not_max_len():
    scheduler = Scheduler(BlockManager(100, 16), max_num_seqs=8, max_num_batched_tokens=64, max_len=4096)
    seqs = [Sequence(i, prompt_len=20, max_new_tokens=4000) for i in range(8)]
    for seq in seqs:
        scheduler.add(seq)
    for _ in range(30):
        simulate_step(scheduler)
    # each sequence holds the blocks of the positions it computed, not room for 4096 positions
    assert all(len(seq.block_table) == scheduler.blocks.blocks_for(seq.num_computed) for seq in seqs)
    assert all(seq.num_generated > 20 for seq in seqs)
    assert scheduler.blocks.num_free == 100 - sum(len(seq.block_table) for seq in seqs) >= 100 - 8 * 4


def test_long_prompt_is_prefilled_in_chunks_beside_decodes():
    scheduler = Scheduler(BlockManager(64, 16), max_num_seqs=4, max_num_batched_tokens=16, max_len=512)
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


def test_a_sequence_that_cannot_grow_preempts_the_newest_which_is_recomputed():
    blocks = BlockManager(6, 4)  # 24 positions for everyone
    scheduler = Scheduler(blocks, max_num_seqs=4, max_num_batched_tokens=32, max_len=64)
    old, new = Sequence(0, prompt_len=4, max_new_tokens=14), Sequence(1, prompt_len=4, max_new_tokens=14)
    scheduler.add(old)
    scheduler.add(new)
    preempted_at = None
    steps = 0
    while scheduler.has_work:
        simulate_step(scheduler)
        steps += 1
        if new.num_preemptions and preempted_at is None:
            preempted_at = new.num_generated
            assert new.status is SequenceStatus.WAITING and new.num_computed == 0 and not new.block_table
        assert blocks.num_free + sum(len(s.block_table) for s in scheduler.running) == 6
        assert steps < 1000
    assert old.num_preemptions == 0 and new.num_preemptions >= 1
    assert preempted_at is not None and preempted_at > 0
    # the preempted sequence came back and finished all its tokens: recomputed, not truncated
    assert (old.num_generated, new.num_generated) == (14, 14)
    assert new.finish_reason is FinishReason.LENGTH and blocks.num_free == 6


def test_a_sequence_alone_that_outgrows_the_cache_is_finished_with_cache_full():
    scheduler = Scheduler(BlockManager(2, 4), max_num_seqs=1, max_num_batched_tokens=8, max_len=64)
    seq = Sequence(0, prompt_len=3, max_new_tokens=20)
    scheduler.add(seq)
    while scheduler.has_work:
        simulate_step(scheduler)
    assert seq.finish_reason is FinishReason.CACHE_FULL and scheduler.out_of_memory == [seq]
    assert seq.length == 8 + 1 and seq.num_computed == 8  # every cached position was computed, none overwritten
    assert scheduler.blocks.num_free == 2


def test_finish_frees_the_blocks_at_once_even_mid_prefill():
    scheduler = Scheduler(BlockManager(4, 16), max_num_seqs=1, max_num_batched_tokens=8, max_len=512)
    first, second = Sequence(0, 40, 10), Sequence(1, 5, 2)
    scheduler.add(first)
    scheduler.add(second)
    simulate_step(scheduler)
    assert first.status is SequenceStatus.RUNNING and scheduler.blocks.num_free == 3
    scheduler.finish(first)  # a cancellation
    assert scheduler.blocks.num_free == 4 and first.block_table == [] and first.finish_reason is FinishReason.ABORTED
    chunks = simulate_step(scheduler)
    assert [c.seq for c in chunks] == [second]
    scheduler.finish(Sequence(9, 1, 1))  # finishing an unknown sequence is harmless


def test_the_scheduler_imports_without_torch():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        from vocalis.stages.runtime.block_manager import BlockManager
        from vocalis.stages.runtime.scheduler import Scheduler
        from vocalis.stages.runtime.sequence import Sequence
        scheduler = Scheduler(BlockManager(8, 4), max_num_seqs=2, max_num_batched_tokens=8, max_len=32)
        scheduler.add(Sequence(0, prompt_len=5, max_new_tokens=3))
        while scheduler.has_work:
            ready = scheduler.advance(scheduler.schedule())
            scheduler.postprocess(ready, [False] * len(ready))
        assert "torch" not in {name.split(".")[0] for name, module in sys.modules.items() if module is not None}
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
