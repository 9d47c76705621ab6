"""Drama 3's talker on the autoregressive runtime (tiny checkpoint, greedy): the tower cache each sequence carries
is filled in every prefill chunk and rebuilt after a preemption, so the frames of a request do not depend on how
its prompt was chunked, on what ran beside it, or on being preempted and recomputed. Requests are greedy and seeded:
a greedy pick that repeats a recent main token is redrawn at temperature 1 (the reference's rule), from the seed."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
from tokenizers import Tokenizer

from tests.host_reads import HostReads
from vocalis.stages.models.drama3.config import Drama3Config
from vocalis.stages.models.drama3.runtime import Drama3Input, Drama3Talker
from vocalis.stages.models.drama3.weights import load_drama3
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem

TEXTS = ["<|speaker:3|> Hello world, this is a tiny voice.", "[sighs] <whisper>good morning</whisper>"]


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@pytest.fixture(scope="module")
def talker(drama3_dir):
    model = load_drama3(drama3_dir, Drama3Config.from_dir(drama3_dir))
    return Drama3Talker(model, Tokenizer.from_file(str(drama3_dir / "tokenizer.json")), 128, encoder=None)


def request(text: str, frames: int = 10) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=Drama3Input(SamplingParams(temperature=0.0, seed=5, max_new_tokens=frames)),
                            output=NullOutput())


def drive(talker, requests: list[SynthesisRequest], **options) -> list[torch.Tensor]:
    stage = AutoregressiveStage("talker", talker, block_size=8, **options)
    for r in requests:
        stage.add(StageItem(r))
    frames: dict[int, list[torch.Tensor]] = defaultdict(list)
    with torch.inference_mode():
        while stage.has_work():
            for item in stage.step():
                frames[id(item.request)].append(item.payload)
    if "kv_cache_bytes" in options:
        assert stage.scheduler.num_preemptions > 0
    return [torch.cat(frames[id(r)]) for r in requests]


def test_frames_do_not_depend_on_chunking_batching_or_preemption(talker):
    alone = [drive(talker, [request(t)])[0] for t in TEXTS]
    assert all(f.shape == (10, 10) for f in alone)  # prompts of 76 and 74 positions: ten frames need a block more
    chunked = drive(talker, [request(TEXTS[0])], max_num_seqs=2, max_num_batched_tokens=20)[0]
    assert torch.equal(chunked, alone[0])
    # both admitted together into 21 blocks of 8, one short of their growth: one is preempted and recomputed
    block_bytes = talker.cache_shape.bytes_per_position(4) * 8
    together = drive(talker, [request(t) for t in TEXTS], max_num_seqs=2, kv_cache_bytes=block_bytes * 21)
    for got, expected in zip(together, alone, strict=True):
        assert torch.equal(got, expected)


def test_a_step_reads_nothing_back_but_the_emitted_frames(talker, monkeypatch):
    """Sampling (main token, repeat redraw, codes) stays on the model's device: a decode step's only host read is the
    frames it emits."""
    reads: dict[str, list[list[str]]] = defaultdict(list)

    def watched(name):
        method = getattr(talker, name)

        def call(*args, **kwargs):
            with HostReads() as mode:
                out = method(*args, **kwargs)
            reads[name].append(mode.calls)
            return out
        return call

    for name in ("sample_frames", "frame_embeds"):
        monkeypatch.setattr(talker, name, watched(name))
    seeded = SynthesisRequest(text=TEXTS[1], stage_input=Drama3Input(SamplingParams(seed=3, max_new_tokens=6)), output=NullOutput())
    drive(talker, [request(TEXTS[0], frames=6), seeded])
    assert len(reads["sample_frames"]) == 6
    assert all(calls == ["cpu"] for calls in reads["sample_frames"])
    assert all(calls == [] for calls in reads["frame_embeds"])


def test_sampled_frames_follow_the_seed_whatever_the_batch(talker):
    """Seeded sampling (temperature 1, the request's top-k/top-p): each row draws from its own generators, so a request's
    frames are the same alone and beside another, and another seed gives other frames."""
    def sampled(text, seed):
        params = SamplingParams(temperature=1.0, top_k=50, top_p=0.9, seed=seed, max_new_tokens=6)
        return SynthesisRequest(text=text, stage_input=Drama3Input(params), output=NullOutput())

    alone = drive(talker, [sampled(TEXTS[0], 11)])[0]
    together = drive(talker, [sampled(TEXTS[1], 12), sampled(TEXTS[0], 11)], max_num_seqs=2)
    assert torch.equal(together[1], alone)
    assert not torch.equal(drive(talker, [sampled(TEXTS[0], 13)])[0], alone)
