"""The stage runtime on the tiny two-stage family: batching, chunking, cancellation, failures, overlap."""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict

import numpy as np
import pytest
import torch

from tests.tolerance import rounding_bound, traced
from vocalis.stages.api.errors import InvalidField, SynthesisFailed
from vocalis.stages.api.max_new_tokens import CAPPED
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.stages.models._template.runtime import POISON, TinyCodecModel, TinyInput, TinyTalkerModel
from vocalis.stages.models._template.weights import load_modules
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.output import AudioOutput
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.prompt_room import PROMPT_TOO_LONG
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=60)


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    # eos_token_id outside the codebook: sequences run to max_new_tokens, so lengths are under test control
    path = build_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-tts", eos_token_id=64)
    return load_modules(path)


@pytest.fixture(scope="module")
def modules_with_eos(tmp_path_factory):
    return load_modules(build_checkpoint(tmp_path_factory.mktemp("tiny-eos") / "tiny-tts"))


def request(text: str, sampling: SamplingParams = GREEDY, output=None, asked: int | None = None) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=TinyInput(sampling), output=output or NullOutput(), max_new_tokens=asked)


def drive(stage: AutoregressiveStage, joins: dict[int, list[SynthesisRequest]]) -> dict[int, torch.Tensor]:
    """Step the stage, adding requests at the given steps; the frames each request produced."""
    frames: dict[int, list[torch.Tensor]] = defaultdict(list)
    step = 0
    while joins or stage.has_work():
        for r in joins.pop(step, []):
            stage.add(StageItem(r))
        with torch.inference_mode():
            outputs = stage.step()
        assert stage.num_running <= stage.scheduler.max_num_seqs
        assert len(stage.batch_requests()) <= stage.scheduler.max_num_seqs
        for item in outputs:
            frames[id(item.request)].append(item.payload)
        step += 1
    return {key: torch.cat(value) for key, value in frames.items()}


def talker_stage(modules, max_num_seqs=16, budget=256) -> AutoregressiveStage:
    _, talker, _ = modules
    return AutoregressiveStage("talker", TinyTalkerModel(talker, 512), max_num_seqs=max_num_seqs, max_num_batched_tokens=budget)


def test_batch_invariance_of_frames(modules):
    target = request("the quick brown fox jumps over the lazy dog")
    alone = drive(talker_stage(modules), {0: [target]})[id(target)]
    assert alone.shape == (60, 4) and len(torch.unique(alone[:, 0])) > 5

    rng = random.Random(1)
    target_again = request("the quick brown fox jumps over the lazy dog")
    joins: dict[int, list[SynthesisRequest]] = defaultdict(list)
    for _ in range(15):
        text = "".join(rng.choice("abcdefghij klmnop") for _ in range(rng.randint(3, 90)))
        sampling = SamplingParams(temperature=0.0, max_new_tokens=rng.randint(3, 80))
        joins[rng.randint(0, 50)].append(request(text, sampling))
    joins[7].append(target_again)
    crowded = drive(talker_stage(modules, budget=64), dict(joins))[id(target_again)]
    assert torch.equal(crowded, alone)


def test_steady_decode_steps_continue_the_kept_context(modules):
    """The same sequences decoding step after step gather their context once; the frames are those of a stage whose
    every step gathers from the blocks."""
    texts = [f"request number {i}" for i in range(4)]
    kept, gathering = talker_stage(modules), talker_stage(modules)
    gathering.cache.decode_context = None
    made = [drive(stage, {0: [request(t) for t in texts]}) for stage in (kept, gathering)]
    assert [f.tolist() for f in made[0].values()] == [f.tolist() for f in made[1].values()]
    assert kept.cache.decode_context.gathers == 1


def test_seeded_sampling_is_batch_invariant(modules):
    sampling = SamplingParams(temperature=0.9, top_k=20, top_p=0.9, repetition_penalty=1.1, seed=42, max_new_tokens=30)
    first = request("seeded", sampling)
    alone = drive(talker_stage(modules), {0: [first]})[id(first)]
    second = request("seeded", sampling)
    others = {0: [request(f"other {i}") for i in range(5)], 3: [second]}
    assert torch.equal(drive(talker_stage(modules), others)[id(second)], alone)
    third = request("seeded", SamplingParams(temperature=0.9, seed=43, max_new_tokens=30))
    assert not torch.equal(drive(talker_stage(modules), {0: [third]})[id(third)], alone)


def test_max_num_seqs_is_never_exceeded(modules):
    stage = talker_stage(modules, max_num_seqs=4, budget=32)
    requests = [request(f"request {i}", SamplingParams(temperature=0.0, max_new_tokens=5 + i)) for i in range(20)]
    frames = drive(stage, {0: requests})
    assert all(len(frames[id(r)]) == 5 + i for i, r in enumerate(requests))
    assert stage.cache.num_free == stage.cache.num_blocks


def test_cancel_frees_the_blocks_within_one_step(modules):
    stage = talker_stage(modules, max_num_seqs=4)
    requests = [request(f"cancel me {i}") for i in range(3)]
    for r in requests:
        stage.add(StageItem(r))
    with torch.inference_mode():
        stage.step()
        stage.step()
    held = stage._sequences[id(requests[1])].block_table
    before, released = stage.cache.num_free, len(held)
    assert released > 0
    requests[1].cancel()
    with torch.inference_mode():
        outputs = stage.step()
    assert stage.cache.num_free == before + released
    assert {id(item.request) for item in outputs} == {id(requests[0]), id(requests[2])}


@pytest.mark.parametrize(
    "policy",
    [
        ChunkPolicy(first_chunk_frames=1, chunk_frames=10, left_context_frames=8),
        ChunkPolicy(first_chunk_frames=1, chunk_frames=3, left_context_frames=6),
        ChunkPolicy(first_chunk_frames=5, chunk_frames=7, left_context_frames=6, growth=1.5, max_chunk_frames=20),
        ChunkPolicy(first_chunk_frames=2, chunk_frames=4, left_context_frames=6, lookahead_frames=2),
    ],
)
def test_chunked_decoding_equals_whole_decoding(modules, policy):
    _, _, codec = modules
    decoder = TinyCodecModel(codec)
    stage = ChunkStage("code2wav", decoder, policy, max_num_seqs=16)
    gen = torch.Generator().manual_seed(0)
    streams = {n: (request(f"s{n}"), torch.randint(0, 64, (n, 4), generator=gen)) for n in (1, 23, 57)}
    emitted: dict[int, list[np.ndarray]] = defaultdict(list)
    finished = set()
    for t in range(60):
        for n, (r, frames) in streams.items():
            if t < n:
                stage.add(StageItem(r, frames[t : t + 1], finished=t == n - 1))
        while stage.has_work():
            with torch.inference_mode():
                for item in stage.step():
                    if item.payload is not None:
                        emitted[n_of(streams, item.request)].append(item.payload)
                    if item.finished:
                        finished.add(n_of(streams, item.request))
    assert finished == set(streams)
    for n, (_, frames) in streams.items():
        with torch.inference_mode(), traced() as path:
            whole = codec(frames[None])[0].numpy()
        streamed = np.concatenate(emitted[n])
        assert streamed.shape == whole.shape
        # the same layers over other lengths: float32 over the codec's path, at the samples' magnitude (the tiny codec
        # is well-conditioned: a float32 decode of 57 frames is 2.2e-7 off a float64 one, a twentieth of this bound)
        np.testing.assert_allclose(streamed, whole, atol=rounding_bound(torch.float32, float(np.abs(whole).max()), path.steps), rtol=0)
        if policy.first_chunk_frames == 1:
            assert len(emitted[n][0]) == decoder.samples_per_frame  # the first chunk is one frame


def n_of(streams, req) -> int:
    return next(n for n, (r, _) in streams.items() if r is req)


DEFAULT_POLICY = ChunkPolicy(first_chunk_frames=1, chunk_frames=10, left_context_frames=8)


def pipeline(modules, decoder=None, talker=None, policy=DEFAULT_POLICY):
    _, talker_module, codec = modules
    return Pipeline(
        [
            AutoregressiveStage("talker", talker or TinyTalkerModel(talker_module, 512), max_num_seqs=16, max_num_batched_tokens=256),
            ChunkStage("code2wav", decoder or TinyCodecModel(codec), policy, max_num_seqs=16),
        ]
    )


async def collect(r: SynthesisRequest) -> np.ndarray:
    pieces = [chunk async for chunk in r.output]
    return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)


@pytest.mark.parametrize("hold", [0.0, 0.05], ids=["decoded-at-once", "held-to-batch"])
async def test_samples_are_batch_invariant_through_the_pipeline(modules, hold):
    running = pipeline(modules, policy=ChunkPolicy(first_chunk_frames=1, chunk_frames=10, left_context_frames=8, max_hold_s=hold))
    try:
        alone = request("batch invariance of samples", output=AudioOutput())
        running.submit(alone)
        reference = await collect(alone)
        rng = random.Random(3)
        target = request("batch invariance of samples", output=AudioOutput())
        others = []
        for _ in range(15):
            sampling = SamplingParams(temperature=0.0, max_new_tokens=rng.randint(5, 80))
            others.append(request("x" * rng.randint(1, 60), sampling, AudioOutput()))
        for i, other in enumerate(others):
            running.submit(other)
            if i == 6:
                running.submit(target)
            await asyncio.sleep(rng.random() * 0.01)
        results = await asyncio.gather(collect(target), *(collect(o) for o in others))
        with torch.inference_mode(), traced() as path:  # the codec's steps, counted on a decode as long (60 frames)
            modules[2](torch.zeros(1, 60, 4, dtype=torch.long))
        # the same tokens (greedy), decoded in other batches: float32 over the codec's path, at the samples' magnitude
        # (well-conditioned, test_chunked_decoding_equals_whole_decoding)
        np.testing.assert_allclose(results[0], reference, atol=rounding_bound(torch.float32, float(np.abs(reference).max()), path.steps), rtol=0)
        assert len(reference) == 60 * 160
    finally:
        running.close()


async def test_bad_input_fails_only_its_request(modules_with_eos):
    running = pipeline(modules_with_eos)
    try:
        good = request("good one", output=AudioOutput())
        bad = request(f"bad {POISON} one", output=AudioOutput())
        running.submit(bad)
        running.submit(good)
        with pytest.raises(SynthesisFailed, match="BEL"):
            await collect(bad)
        audio = await collect(good)
        assert good.error is None and good.output_tokens >= 1 and len(audio) == good.output_tokens * 160
        again = request("after the failure", output=AudioOutput())
        running.submit(again)
        await collect(again)
        assert again.finished_at is not None and again.error is None
    finally:
        running.close()


class FailingTalker(TinyTalkerModel):
    """Raises in the batched forward whenever the step's batch holds a request whose text starts with "crash"."""

    stage: AutoregressiveStage | None = None

    def forward(self, embeds, batch, cache):
        if any(r.text.startswith("crash") for r in self.stage.batch_requests()):
            raise RuntimeError("simulated device fault")
        return super().forward(embeds, batch, cache)


async def test_a_failing_step_fails_its_batch_and_the_worker_goes_on(modules):
    _, talker_module, _ = modules
    talker = FailingTalker(talker_module, 512)
    running = pipeline(modules, talker=talker)
    talker.stage = running.stages[0]
    try:
        crash = request("crash now", output=AudioOutput())
        running.submit(crash)
        with pytest.raises(SynthesisFailed, match="simulated device fault"):
            await collect(crash)
        later = request("later", SamplingParams(temperature=0.0, max_new_tokens=10), AudioOutput())
        running.submit(later)
        assert len(await collect(later)) == 10 * 160
    finally:
        running.close()


class SlowDecoder(TinyCodecModel):
    def __init__(self, codec) -> None:
        super().__init__(codec)
        self.intervals: list[tuple[float, float]] = []

    def decode(self, frames, streams):
        start = time.monotonic()
        time.sleep(0.03)
        out = super().decode(frames, streams)
        self.intervals.append((start, time.monotonic()))
        return out


class TimedTalker(TinyTalkerModel):
    def __init__(self, talker, max_len) -> None:
        super().__init__(talker, max_len)
        self.times: list[float] = []

    def sample_frames(self, hidden, samplers, histories, states):
        self.times.append(time.monotonic())
        return super().sample_frames(hidden, samplers, histories, states)


async def test_stages_overlap(modules):
    _, talker_module, codec = modules
    decoder, talker = SlowDecoder(codec), TimedTalker(talker_module, 512)
    running = pipeline(modules, decoder=decoder, talker=talker, policy=ChunkPolicy(first_chunk_frames=1, chunk_frames=5, left_context_frames=6))
    try:
        r = request("overlap", SamplingParams(temperature=0.0, max_new_tokens=60), AudioOutput())
        running.submit(r)
        assert len(await collect(r)) == 60 * 160
    finally:
        running.close()
    inside = [t for t in talker.times if any(start < t < end for start, end in decoder.intervals)]
    # stage 0 generated frames while stage 1 was busy decoding earlier ones
    assert len(inside) >= 10, (len(inside), len(talker.times), len(decoder.intervals))


def test_serving_reserves_kv_by_the_budget_not_max_num_seqs_times_max_len(tmp_path):
    from vocalis.stages.models._template.family import FAMILY
    from vocalis.stages.models._template.loader import load
    from vocalis.stages.runtime.deploy import load_deploy

    checkpoint = build_checkpoint(tmp_path / "tiny-tts", eos_token_id=64)
    for budget in (1 << 20, 3 << 20):
        deploy = load_deploy(FAMILY.deploy_defaults, None, {"talker": {"max_num_seqs": 32, "max_len": 1024, "kv_cache_bytes": budget}})
        model = load(checkpoint, deploy)
        try:
            cache = model.pipeline.stages[0].cache
            position = 2 * 2 * 2 * 16 * 4  # layers x kv heads x head_dim x (k, v) x float32
            assert budget - 16 * position < cache.bytes <= budget
            assert cache.bytes < 32 * 1024 * position // 4
        finally:
            model.close()


def test_preempted_sequences_are_recomputed_to_the_same_frames(modules):
    texts = [f"preempt me number {i}, a sentence" for i in range(6)]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=50)
    alone = {}
    for text in texts:
        r = request(text, sampling)
        alone[text] = drive(talker_stage(modules), {0: [r]})[id(r)]
    _, talker, _ = modules
    # 12 blocks of 16 positions: room for about two of the six sequences at full length
    tight = AutoregressiveStage("talker", TinyTalkerModel(talker, 512), max_num_seqs=6, max_num_batched_tokens=256,
                                kv_cache_bytes=12 * 16 * 512, block_size=16)
    crowd = [request(text, sampling) for text in texts]
    frames = drive(tight, {0: crowd})
    assert tight.scheduler.num_preemptions > 0
    for text, r in zip(texts, crowd, strict=True):
        assert torch.equal(frames[id(r)], alone[text]), text
    assert tight.cache.num_free == tight.cache.num_blocks


async def test_a_sequence_that_outgrows_the_cache_fails_with_a_clear_reason(modules):
    _, talker_module, codec = modules
    talker = AutoregressiveStage("talker", TinyTalkerModel(talker_module, 512), max_num_seqs=4, max_num_batched_tokens=64,
                                 kv_cache_bytes=4 * 16 * 512, block_size=16)  # 64 positions
    running = Pipeline([talker, ChunkStage("code2wav", TinyCodecModel(codec), DEFAULT_POLICY, max_num_seqs=4)])
    try:
        long = request("too long for the cache", SamplingParams(temperature=0.0, max_new_tokens=100), AudioOutput())
        running.submit(long)
        with pytest.raises(SynthesisFailed, match="KV cache's 64 positions.*raise kv_cache_bytes"):
            await collect(long)
        short = request("fits", SamplingParams(temperature=0.0, max_new_tokens=10), AudioOutput())
        running.submit(short)
        assert len(await collect(short)) == 10 * 160
        assert talker.cache.num_free == talker.cache.num_blocks
    finally:
        running.close()


def test_frames_are_handed_over_per_chunk_of_the_next_stage(modules):
    _, talker, _ = modules
    sampling = SamplingParams(temperature=0.0, max_new_tokens=60)
    per_step, per_chunk = request("hand over", sampling), request("hand over", sampling)
    every = AutoregressiveStage("talker", TinyTalkerModel(talker, 512))
    chunked = AutoregressiveStage("talker", TinyTalkerModel(talker, 512), handover=ChunkPolicy(first_chunk_frames=1, chunk_frames=10, lookahead_frames=2))
    sizes = []
    frames = []
    chunked.add(StageItem(per_chunk))
    with torch.inference_mode():
        while chunked.has_work():
            for item in chunked.step():
                sizes.append((len(item.payload), item.finished))
                frames.append(item.payload)
    # the first chunk (1 frame + 2 lookahead) at once, then every 10 frames, the rest with the end
    assert sizes == [(3, False), (10, False), (10, False), (10, False), (10, False), (10, False), (7, True)]
    assert torch.equal(torch.cat(frames), drive(every, {0: [per_step]})[id(per_step)])


def test_the_stage_alone_fits_a_prompt_to_its_cache(modules):
    """The rule of prompt against cache room, decided by the runtime for every family: a prompt that leaves no room is
    PROMPT_TOO_LONG (a 400, naming the text); a longer max_new_tokens is capped, with a warning only when the cap
    was the caller's."""
    _, talker, _ = modules
    stage = AutoregressiveStage("talker", TinyTalkerModel(talker, 40), max_num_seqs=2, max_num_batched_tokens=64)
    with pytest.raises(InvalidField) as refused:
        stage.add(StageItem(request("a" * 39)))  # 40 positions: no room for a frame
    assert (refused.value.field, refused.value.reason) == ("text", PROMPT_TOO_LONG) and "holds 40" in refused.value.message
    asked, default, within = request("hi", asked=60), request("hi"), request("hi", SamplingParams(temperature=0.0, max_new_tokens=37), asked=37)
    frames = drive(stage, {0: [asked, default, within]})
    assert [len(frames[id(r)]) for r in (asked, default, within)] == [37, 37, 37]  # "hi" + BOS: 3 of the 40 positions
    assert [(field, code) for field, code, _ in asked.warnings] == [("max_new_tokens", CAPPED)]
    assert "ends at 37 tokens" in asked.warnings[0][2] and default.warnings == [] and within.warnings == []


def test_a_prompt_past_the_whole_kv_cache_is_prompt_too_long(modules):
    _, talker, _ = modules
    model = TinyTalkerModel(talker, 512)
    eight_positions = 8 * model.cache_shape.bytes_per_position(torch.float32.itemsize)
    small = AutoregressiveStage("talker", model, max_num_seqs=1, max_num_batched_tokens=64, kv_cache_bytes=eight_positions, block_size=4)
    capacity = small.cache.blocks.capacity
    with pytest.raises(InvalidField) as refused:
        small.add(StageItem(request("a" * capacity)))
    assert refused.value.reason == PROMPT_TOO_LONG and "kv_cache_bytes" in refused.value.message
