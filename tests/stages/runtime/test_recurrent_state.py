"""Per-sequence recurrent state beside the paged KV cache: a hybrid (Gated DeltaNet) talker in the autoregressive stage.

The talker is the tiny Qwen3.5 decoder of tests/goldens/qwen3_5 (weights checked against transformers in
tests/stages/layers/test_gated_deltanet.py) with a greedy token head: its frames are the argmax ids, fed back.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vocalis.stages.components.hybrid import HybridConfig, HybridDecoder
from vocalis.stages.layers.weights import load_strict, take
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, AutoregressiveStage, SequenceStart
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams
from vocalis.stages.runtime.stage import StageItem

GOLDENS = Path(__file__).resolve().parents[2] / "goldens" / "qwen3_5"


class HybridTalker(AutoregressiveModel):
    """An AutoregressiveModel over the hybrid decoder: prompt = the text's bytes mod vocab, frame = greedy next id."""

    emits_eos_frame = False

    def __init__(self, decoder: HybridDecoder) -> None:
        self.decoder = decoder
        self.cache_shape = decoder.cache_shape(512)
        self.state_shape = decoder.state_shape()
        self.forwards: list[AttentionBatch] = []

    def start(self, request: SynthesisRequest, payload: object = None) -> SequenceStart:
        vocab = self.decoder.config.vocab_size
        ids = torch.tensor([b % vocab for b in request.text.encode()])
        return SequenceStart(self.decoder.embed_tokens(ids), request.stage_input)

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: PagedKVCache) -> torch.Tensor:
        self.forwards.append(batch)
        return self.decoder.cached(embeds, batch, cache)

    def sample_frames(self, hidden, samplers: list[SamplerState], histories, states) -> torch.Tensor:
        return (hidden @ self.decoder.embed_tokens.weight.T).argmax(-1, keepdim=True)

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return torch.zeros(frames.shape[0], dtype=torch.bool)

    def frame_embeds(self, frames: torch.Tensor, states) -> torch.Tensor:
        return self.decoder.embed_tokens(frames[:, 0])


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@pytest.fixture(scope="module")
def decoder():
    config = HybridConfig.from_dict(json.loads((GOLDENS / "config.json").read_text()))
    weights = take(load_file(str(GOLDENS / "goldens.safetensors")), "model.")
    return load_strict(HybridDecoder(config), weights, "tiny qwen3_5").eval()


def request(text: str, frames: int = 12) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=SamplingParams(temperature=0.0, max_new_tokens=frames), output=NullOutput())


def stage(decoder, max_num_seqs: int = 8, budget: int = 256, kv_cache_bytes: int = 0) -> AutoregressiveStage:
    return AutoregressiveStage("talker", HybridTalker(decoder), max_num_seqs=max_num_seqs, max_num_batched_tokens=budget,
                               block_size=8, kv_cache_bytes=kv_cache_bytes)


def drive(s: AutoregressiveStage, joins: dict[int, list[SynthesisRequest]]) -> dict[int, torch.Tensor]:
    frames: dict[int, list[torch.Tensor]] = defaultdict(list)
    step = 0
    while joins or s.has_work():
        for r in joins.pop(step, []):
            s.add(StageItem(r))
        with torch.inference_mode():
            for item in s.step():
                frames[id(item.request)].append(item.payload)
        step += 1
    return {key: torch.cat(value)[:, 0] for key, value in frames.items()}


TEXT = "a prompt carried in pieces through the recurrent state of every layer"


def test_frames_do_not_depend_on_what_else_runs(decoder):
    alone_request = request(TEXT)
    alone = drive(stage(decoder), {0: [alone_request]})[id(alone_request)]
    assert len(torch.unique(alone)) > 3
    rng = random.Random(5)
    target = request(TEXT)
    others = [request("other " * rng.randint(1, 8), rng.randint(3, 14)) for _ in range(6)]
    joins: dict[int, list[SynthesisRequest]] = defaultdict(list)
    for r in others:
        joins[rng.randint(0, 8)].append(r)
    joins[3].append(target)
    s = stage(decoder, max_num_seqs=5, budget=40)
    got = drive(s, dict(joins))
    assert torch.equal(got[id(target)], alone)
    assert any(len(b.query_lens) > 1 and max(b.query_lens) > 1 for b in s.model.forwards)  # mixed prefill + decode steps ran
    assert s.cache.states is not None and s.scheduler.slots.num_free == 5


@pytest.mark.parametrize("budget", [7, 30])
def test_chunked_prefill_gives_the_frames_of_a_whole_prefill(decoder, budget):
    whole_request = request(TEXT)
    whole = drive(stage(decoder, budget=512), {0: [whole_request]})[id(whole_request)]
    chunked_request = request(TEXT)
    s = stage(decoder, max_num_seqs=2, budget=budget)
    chunked = drive(s, {0: [chunked_request]})[id(chunked_request)]
    assert max(max(b.query_lens) for b in s.model.forwards) <= budget < len(TEXT)
    assert torch.equal(chunked, whole)


def test_cancel_frees_the_state_slot_with_the_blocks(decoder):
    s = stage(decoder, max_num_seqs=3)
    requests = [request(f"cancel me {i}", 30) for i in range(3)]
    for r in requests:
        s.add(StageItem(r))
    with torch.inference_mode():
        s.step()
        s.step()
    assert s.scheduler.slots.num_free == 0
    slot = s._sequences[id(requests[1])].state_slot
    blocks_before = s.cache.num_free
    requests[1].cancel()
    with torch.inference_mode():
        outputs = s.step()
    assert s.scheduler.slots.num_free == 1 and s.cache.num_free > blocks_before
    assert {id(item.request) for item in outputs} == {id(requests[0]), id(requests[2])}
    # a newcomer takes the freed slot and starts from a zeroed state: its frames are those it makes alone
    newcomer = request(TEXT)
    s.add(StageItem(newcomer))
    frames = drive(s, {})
    assert s._sequences == {} and s.scheduler.slots.num_free == 3
    alone_request = request(TEXT)
    assert torch.equal(frames[id(newcomer)], drive(stage(decoder), {0: [alone_request]})[id(alone_request)])
    assert slot in range(3)


def test_preempted_sequences_restart_their_state_and_recompute_the_same_frames(decoder):
    texts = [TEXT[:30], TEXT[10:40], TEXT[20:60]]
    alone = []
    for t in texts:
        r = request(t, 24)
        alone.append(drive(stage(decoder), {0: [r]})[id(r)])
    # a KV budget too small for all three at full length forces preemptions
    block_bytes = decoder.cache_shape(512).bytes_per_position(4) * 8
    s = stage(decoder, max_num_seqs=3, kv_cache_bytes=block_bytes * 17)
    rs = [request(t, 24) for t in texts]
    got = drive(s, {0: rs})
    assert s.scheduler.num_preemptions > 0
    for r, expected in zip(rs, alone, strict=True):
        assert torch.equal(got[id(r)], expected)
    assert s.scheduler.slots.num_free == 3


def test_slots_follow_blocks_through_admission_preemption_and_finish():
    from vocalis.stages.runtime.block_manager import BlockManager, SlotManager
    from vocalis.stages.runtime.scheduler import Scheduler
    from vocalis.stages.runtime.sequence import Sequence

    slots = SlotManager(2)
    scheduler = Scheduler(BlockManager(8, 4), max_num_seqs=2, max_num_batched_tokens=64, max_len=32, slots=slots)
    a, b, c = (Sequence(i, prompt_len=5, max_new_tokens=4) for i in range(3))
    for seq in (a, b, c):
        scheduler.add(seq)
    scheduler.schedule()
    assert {a.state_slot, b.state_slot} == {0, 1} and c.state_slot is None and slots.num_free == 0
    scheduler.preempt(b)
    assert b.state_slot is None and slots.num_free == 1
    scheduler.finish(a)
    assert a.state_slot is None and slots.num_free == 2
    with pytest.raises(ValueError, match="not allocated"):
        slots.give(0)
    with pytest.raises(ValueError, match="cannot seat"):
        Scheduler(BlockManager(8, 4), max_num_seqs=3, max_num_batched_tokens=64, max_len=32, slots=SlotManager(2))
