"""ChunkDecoder streams: each request's decode stream carries its own conditioning and state across chunks,
rows of different requests decoded in one batched call (what a flow-matching + vocoder decoder needs)."""

from __future__ import annotations

import time

import pytest
import torch

from vocalis.stages.models._template.build import build_checkpoint
from vocalis.stages.models._template.runtime import TinyCodecModel, TinyInput
from vocalis.stages.models._template.weights import load_modules
from vocalis.stages.runtime.chunk_stage import ChunkStage, DecodeStream
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


class ConditionedDecoder(TinyCodecModel):
    """The tiny codec, scaled per request (its "speaker conditioning"), remembering the chunks it decoded per stream."""

    def __init__(self, codec, gains: dict[str, float]) -> None:
        super().__init__(codec)
        self.gains = gains
        self.batches: list[int] = []

    def start(self, request):
        stream = super().start(request)
        stream.conditioning = self.gains[request.text]
        stream.state = []  # frames per decoded chunk, as a vocoder's overlap cache would be carried
        return stream

    def decode(self, frames, streams: list[DecodeStream]):
        self.batches.append(len(streams))
        samples = super().decode(frames, streams)
        for stream in streams:
            stream.state.append(frames.shape[1])
        return samples * torch.tensor([stream.conditioning for stream in streams], dtype=samples.dtype)[:, None]


@pytest.fixture(scope="module")
def codec(tmp_path_factory):
    return load_modules(build_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-tts"))[2]


def request(text: str) -> SynthesisRequest:
    return SynthesisRequest(text, TinyInput(SamplingParams(temperature=0.0)), NullOutput())


def decode_all(stage: ChunkStage, frames: dict[str, torch.Tensor], requests: list[SynthesisRequest]) -> dict[str, torch.Tensor]:
    out: dict[str, list[torch.Tensor]] = {r.text: [] for r in requests}
    for r in requests:
        stage.add(StageItem(r))
    for t in range(next(iter(frames.values())).shape[0]):  # frames arrive one at a time, for every request
        for r in requests:
            stage.add(StageItem(r, frames[r.text][t : t + 1], finished=t == frames[r.text].shape[0] - 1))
        while stage.has_work():
            with torch.inference_mode():  # as the stage's worker runs it
                produced = stage.step()
            for item in produced:
                if item.payload is not None:
                    out[item.request.text].append(torch.as_tensor(item.payload))
    return {text: torch.cat(pieces) for text, pieces in out.items()}


def test_each_row_gets_its_own_conditioning_and_keeps_its_own_state(codec):
    torch.manual_seed(0)
    frames = {name: torch.randint(0, 64, (9, 4)) for name in ("quiet", "loud")}
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=3, left_context_frames=2)
    plain = decode_all(ChunkStage("c", TinyCodecModel(codec), policy), frames, [request("quiet"), request("loud")])
    decoder = ConditionedDecoder(codec, {"quiet": 0.5, "loud": 2.0})
    stage = ChunkStage("c", decoder, policy)
    requests = [request("quiet"), request("loud")]
    streams = {}
    original_start = decoder.start

    def start(r):
        streams[r.text] = original_start(r)
        return streams[r.text]

    decoder.start = start
    scaled = decode_all(stage, frames, requests)
    torch.testing.assert_close(scaled["quiet"], plain["quiet"] * 0.5)
    torch.testing.assert_close(scaled["loud"], plain["loud"] * 2.0)
    assert max(decoder.batches) == 2, "both requests' rows went through one decode call"
    # each stream saw its own chunks: 1 frame, then 3 + context, ..., 4 chunks in all for 9 frames
    assert streams["quiet"].state == streams["loud"].state and len(streams["quiet"].state) == 4
    assert streams["quiet"] is not streams["loud"] and streams["quiet"].state is not streams["loud"].state


def test_ready_chunks_wait_a_moment_for_other_requests_chunks(codec):
    """With max_hold_s, a ready chunk that is neither a request's first nor its last waits while fewer than half of the
    requests have one ready, at most max_hold_s: then they go in one decoder call."""
    decoder = ConditionedDecoder(codec, dict.fromkeys("abcd", 1.0))
    stage = ChunkStage("code2wav", decoder, ChunkPolicy(first_chunk_frames=1, chunk_frames=4, left_context_frames=2, max_hold_s=0.05))
    requests = [request(text) for text in "abcd"]
    frames = torch.randint(0, 64, (5, 4), generator=torch.Generator().manual_seed(0))

    def step() -> list:
        with torch.inference_mode():  # as the stage's worker runs it
            return stage.step()

    for r in requests:
        stage.add(StageItem(r, frames[:1]))
    assert stage.has_work() and len(step()) == 4  # first chunks: at once, together
    stage.add(StageItem(requests[0], frames[1:5]))
    assert not stage.has_work() and 0 < stage.wake_in() <= 0.05  # one of four ready: held
    stage.add(StageItem(requests[1], frames[1:5]))
    assert stage.has_work() and stage.wake_in() is None  # two of four: decoded together
    assert [item.request for item in step()] == requests[:2] and decoder.batches[-1] == 2
    stage.add(StageItem(requests[2], frames[1:5]))
    assert not stage.has_work()
    time.sleep(0.06)
    assert stage.has_work()  # held for max_hold_s: now alone
    assert len(step()) == 1 and decoder.batches[-1] == 1
    stage.add(StageItem(requests[3], frames[1:3], finished=True))
    assert stage.has_work()  # a request's last chunk: at once
    assert step()[0].finished


class RowByRowDecoder(ConditionedDecoder):
    rows_at_once = False


def test_a_decoder_that_loops_over_its_rows_gets_one_a_step_the_longest_ready_first_never_held(codec):
    """Its rows cost the same in one call or in several: each request's chunk leaves as soon as its own row is
    decoded, in the order they became ready, and a ready chunk is not held back for the others."""
    decoder = RowByRowDecoder(codec, dict.fromkeys("abc", 1.0))
    stage = ChunkStage("flow", decoder, ChunkPolicy(first_chunk_frames=1, chunk_frames=4, left_context_frames=2, max_hold_s=10.0))
    requests = [request(text) for text in "abc"]
    frames = torch.randint(0, 64, (5, 4), generator=torch.Generator().manual_seed(1))

    def step() -> list:
        with torch.inference_mode():
            return stage.step()

    for r in reversed(requests):  # c's first chunk became ready first
        stage.add(StageItem(r, frames[:1]))
        time.sleep(0.002)
    order = []
    while stage.has_work():
        produced = step()
        assert len(produced) == 1
        order.append(produced[0].request.text)
    assert order == ["c", "b", "a"] and decoder.batches == [1, 1, 1]
    stage.add(StageItem(requests[0], frames[1:5]))
    assert stage.has_work() and stage.wake_in() is None  # one of three ready: not held for 10 s
    assert [item.request.text for item in step()] == ["a"]
