"""The chunking policy alone: which frames each decode sees and which samples it emits."""

from __future__ import annotations

import pytest

from vocalis.stages.runtime.chunking import ChunkPolicy


def windows(policy: ChunkPolicy, total: int, first: int | None = None) -> list:
    """Feed frames one at a time, then finish; collect the windows in order."""
    emitted, index, out = 0, 0, []
    for available in range(1, total + 1):
        while (window := policy.next_window(emitted, available, False, index, first)) is not None:
            out.append(window)
            emitted, index = window.end, index + 1
    while (window := policy.next_window(emitted, total, True, index, first)) is not None:
        out.append(window)
        emitted, index = window.end, index + 1
    return out


def test_first_small_then_fixed_chunks_with_context():
    result = windows(ChunkPolicy(first_chunk_frames=1, chunk_frames=25, left_context_frames=25), 80)
    assert [(w.start, w.end) for w in result] == [(0, 1), (1, 26), (26, 51), (51, 76), (76, 80)]
    assert [w.context_start for w in result] == [0, 0, 1, 26, 51]


def test_growth_and_cap():
    policy = ChunkPolicy(first_chunk_frames=2, chunk_frames=4, left_context_frames=3, growth=2.0, max_chunk_frames=10)
    sizes = [w.end - w.start for w in windows(policy, 60)]
    assert sizes[:5] == [2, 4, 8, 10, 10] and sum(sizes) == 60


def test_lookahead_waits_for_future_frames():
    policy = ChunkPolicy(first_chunk_frames=2, chunk_frames=2, left_context_frames=0, lookahead_frames=3)
    assert policy.next_window(0, 4, False, 0) is None
    window = policy.next_window(0, 5, False, 0)
    assert (window.start, window.end, window.lookahead_end) == (0, 2, 5)
    last = policy.next_window(8, 9, True, 4)
    assert (last.start, last.end, last.lookahead_end) == (8, 9, 9)


def test_per_request_first_chunk():
    result = windows(ChunkPolicy(first_chunk_frames=1, chunk_frames=5), 12, first=4)
    assert [(w.start, w.end) for w in result] == [(0, 4), (4, 9), (9, 12)]


def test_nothing_to_decode_when_finished_empty():
    assert ChunkPolicy().next_window(0, 0, True, 0) is None


def test_bad_settings():
    with pytest.raises(ValueError):
        ChunkPolicy(first_chunk_frames=0)
    with pytest.raises(ValueError):
        ChunkPolicy(growth=0.5)
