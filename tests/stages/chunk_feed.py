"""Feeding a ChunkDecoder's stage frame by frame, as a talker emits them, to compare streamed audio with a whole
decode (the stateful codec streams' tests)."""

from __future__ import annotations

import pytest
import torch

from vocalis.stages.runtime.chunk_stage import ChunkDecoder, ChunkStage, DecodeStream
from vocalis.stages.runtime.chunking import ChunkPolicy, Window
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


def record_streams(monkeypatch, codec) -> list[list[int]]:
    """Records the frames of each row of each `codec.stream(codes, states, frames)` call, in a list per call."""
    calls: list[list[int]] = []
    inner = codec.stream

    def stream(codes, states, frames):
        calls.append(list(frames))
        return inner(codes, states, frames)

    monkeypatch.setattr(codec, "stream", stream)
    return calls


@pytest.fixture(scope="module")
def one_torch_thread():
    """Thousands of small convolutions: torch's thread pool only slows them down on a busy machine. A module that wants
    it imports it and says `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def feed(decoder: ChunkDecoder, policy: ChunkPolicy, frames_of: list[torch.Tensor], max_num_seqs: int = 4,
         requests: list[SynthesisRequest] | None = None) -> list[torch.Tensor]:
    """Each request's frames [T, ...] added one by one (the requests interleaved); the audio each one streams.
    `requests`: the requests to stream for (each announced to the stage first, as the talker does); default: bare ones."""
    stage = ChunkStage("codec", decoder, policy, max_num_seqs=max_num_seqs)
    if requests is None:
        requests = [SynthesisRequest(text="x", stage_input=None, output=NullOutput()) for _ in frames_of]
    else:
        for r in requests:
            stage.add(StageItem(r))
    audio: dict[int, list] = {id(r): [] for r in requests}
    for t in range(max(len(f) for f in frames_of)):
        for r, frames in zip(requests, frames_of, strict=True):
            if t < len(frames):
                stage.add(StageItem(r, frames[t : t + 1], finished=t == len(frames) - 1))
        while stage.has_work():
            with torch.inference_mode():
                for item in stage.step():
                    if item.payload is not None:
                        audio[id(item.request)].append(torch.from_numpy(item.payload))
    return [torch.cat(audio[id(r)]) for r in requests]


def decode_in_calls(decoder: ChunkDecoder, frames_of: list[torch.Tensor], calls: list[list[int]]) -> list[torch.Tensor]:
    """Decodes requests together in shared calls of uneven rows: calls[k][i] frames of request i in call k (0: not
    in that call), each row's window right-padded to the call's longest, as the ChunkStage batches them; the audio of
    each request's frames so decoded."""
    streams = [DecodeStream() for _ in frames_of]
    done = [0] * len(frames_of)
    audio: list[list[torch.Tensor]] = [[] for _ in frames_of]
    hop = decoder.samples_per_frame
    for sizes in calls:
        rows = [i for i, n in enumerate(sizes) if n]
        longest = max(sizes)
        batch = []
        for i in rows:
            start, end = done[i], done[i] + sizes[i]
            streams[i].window = Window(start, start, end, end)
            piece = frames_of[i][start:end]
            batch.append(torch.cat([piece, piece.new_zeros((longest - len(piece), *piece.shape[1:]))]))
        with torch.inference_mode():
            samples = decoder.decode(torch.stack(batch), [streams[i] for i in rows])
        for row, i in enumerate(rows):
            audio[i].append(samples[row, : sizes[i] * hop])
            done[i] += sizes[i]
    assert done == [len(f) for f in frames_of], "the calls must cover every request's frames"
    return [torch.cat(a) for a in audio]


def carried_sizes(decoder: ChunkDecoder, frames: torch.Tensor, step: int) -> tuple[DecodeStream, list[int]]:
    """Decodes one request's frames `step` at a time from its carried state; the state, and the elements it carries
    after each call."""
    state = DecodeStream()
    sizes = []
    with torch.inference_mode():
        for start in range(0, len(frames), step):
            state.window = Window(start, start, start + step, start + step)
            decoder.decode(frames[None, start : start + step], [state])
            sizes.append(sum(t.numel() for kept in state.state.carry.values() for t in (kept if isinstance(kept, tuple) else (kept,))))
    return state, sizes
