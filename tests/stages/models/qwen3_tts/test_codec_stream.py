"""code2wav streams from a carried decoder state: on the tiny Base checkpoint, a clone request whose reference clip
is longer than any fixed left context (60 codes) streams, in chunks of any size, the samples of the whole decode
(reference codes + generated frames, the reference's audio cut), while the decoder is given only each chunk's new
frames; requests batched together stay independent, and the carried keys/values stay one window long."""

from __future__ import annotations

import pytest
import torch

from tests.stages.chunk_feed import NullOutput, carried_sizes, feed
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.qwen3_tts.prompt import Conditioning
from vocalis.stages.models.qwen3_tts.runtime import Qwen3TTSInput, code2wav
from vocalis.stages.models.qwen3_tts.voices import VoiceCloner
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.chunking import ChunkPolicy, Window
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams

from .goldens import modules

CLIP, FRAMES = 60, 24


def exact(clip: torch.Tensor | None, frames: torch.Tensor) -> float:
    """A stream against the whole decode: the same layers over other lengths, which the kernels may block and round
    differently. float32 over the decode's path (traced), at the magnitude of the samples compared, not of the path's
    peak: this decoder is well-conditioned (its float32 decode is within 1.1e-7, 3 eps of max |samples|, of a float64
    one), and the peak's bound (1e-4) would pass a bug that the control below measures at 2.9e-5."""
    with traced() as path:
        samples = whole(clip, frames)
    return rounding_bound(torch.float32, float(samples.abs().max()), path.steps)


class Spy(ChunkDecoder):
    """code2wav, recording the frames each decode call is given, per row."""

    causal = True

    def __init__(self, mods) -> None:
        self.decoder = code2wav(mods.decoder, VoiceCloner(mods))
        self.samples_per_frame = self.decoder.samples_per_frame
        self.given: list[int] = []
        self.rows: list[int] = []

    def start(self, request):
        return self.decoder.start(request)

    def decode(self, frames, streams):
        self.given.extend(stream.window.end - stream.window.context_start for stream in streams)
        self.rows.append(len(streams))
        return self.decoder.decode(frames, streams)


def codes(count: int, seed: int) -> torch.Tensor:
    c = modules("base-1b7").decoder.config
    return torch.randint(0, c.codebook_size, (count, c.num_quantizers), generator=torch.Generator().manual_seed(seed))


def request(clip: torch.Tensor | None) -> SynthesisRequest:
    inputs = Qwen3TTSInput(Conditioning(language="english", ref_codes=clip), SamplingParams(), SamplingParams())
    return SynthesisRequest(text="clone", stage_input=inputs, output=NullOutput())


def whole(clip: torch.Tensor | None, frames: torch.Tensor) -> torch.Tensor:
    """The decode of all a request's codes at once, the reference codes' audio cut."""
    before = 0 if clip is None else len(clip)
    all_codes = frames if clip is None else torch.cat([clip, frames])
    with torch.inference_mode():
        return modules("base-1b7").decoder(all_codes.T[None])[0, before * 1920 :]


def stream(policy: ChunkPolicy, requests: list[tuple[SynthesisRequest, torch.Tensor]], max_num_seqs: int = 4) -> tuple[list[torch.Tensor], Spy]:
    """Feeds each request's frames one by one (the requests interleaved, as the talker emits them) and collects the
    audio each one streams."""
    mods = modules("base-1b7")
    spy = Spy(mods)
    audio = feed(spy, policy, [f for _, f in requests], max_num_seqs, requests=[r for r, _ in requests])
    return audio, spy


@pytest.mark.parametrize(("first", "chunk", "growth", "sizes"), [
    (1, 1, 1.0, [1] * FRAMES),
    (4, 4, 1.0, [4] * 6),
    (3, 2, 1.6, [3, 2, 3, 5, 8, 3]),  # uneven: growing chunks, the last cut short by the end
])
def test_a_long_clip_clone_streams_its_whole_decode_from_new_frames_only(first, chunk, growth, sizes):
    clip, frames = codes(CLIP, 1), codes(FRAMES, 2)
    policy = ChunkPolicy(first_chunk_frames=first, chunk_frames=chunk, left_context_frames=0, growth=growth, max_chunk_frames=8)
    (audio,), spy = stream(policy, [(request(clip), frames)])
    assert spy.given == sizes  # each call gets the chunk's new frames; the clip is decoded once, into the state
    expected = whole(clip, frames)
    assert audio.shape == expected.shape
    assert float((audio - expected).abs().max()) <= exact(clip, frames)  # measured 2e-7


def test_a_configured_left_context_is_not_decoded_again():
    """With left context in the policy the window holds frames the state has decoded: they are skipped."""
    clip, frames = codes(CLIP, 3), codes(FRAMES, 4)
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=5, left_context_frames=25, max_chunk_frames=5)
    (audio,), _ = stream(policy, [(request(clip), frames)])
    assert float((audio - whole(clip, frames)).abs().max()) <= exact(clip, frames)


def test_batched_requests_stay_independent():
    """A clone (its first call decodes 60 reference codes more than the others) and two plain requests of different
    lengths, decoded in shared batches: each streams its own whole decode, and the same as when decoded alone."""
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=3, left_context_frames=0, max_chunk_frames=3)
    cases = [(request(codes(CLIP, 5)), codes(FRAMES, 6)), (request(None), codes(17, 7)), (request(None), codes(FRAMES, 8))]
    together, spy = stream(policy, cases)
    assert max(spy.rows) == 3  # the three shared calls
    for (r, frames), audio in zip(cases, together, strict=True):
        clip = r.stage_input.conditioning.ref_codes
        assert float((audio - whole(clip, frames)).abs().max()) <= exact(clip, frames)
        (alone,), _ = stream(policy, [(request(clip), frames)], max_num_seqs=1)
        assert float((audio - alone).abs().max()) <= exact(clip, frames)


def test_the_carried_state_stays_one_window_long():
    mods = modules("base-1b7")
    decoder = code2wav(mods.decoder, VoiceCloner(mods))
    c = mods.decoder.config
    state, sizes = carried_sizes(decoder, codes(200, 9), 50)
    assert state.state.frames == 200
    assert len(set(sizes)) == 1  # bounded: the same after 50 frames as after 200
    keys, _ = state.state.carry[mods.decoder.pre_transformer.layers[0].self_attn]
    assert keys.shape == (1, c.num_key_value_heads, c.sliding_window - 1, c.head_dim)


def test_a_window_that_skips_frames_is_refused():
    mods = modules("base-1b7")
    decoder = code2wav(mods.decoder, VoiceCloner(mods))
    state = DecodeStream(window=Window(4, 4, 8, 8))  # the state has decoded nothing, the window starts at frame 4
    with pytest.raises(ValueError, match="starts at 4"), torch.inference_mode():
        decoder.decode(codes(4, 10)[None], [state])


def test_the_reference_codes_reach_the_convolutions_only_as_far_back_as_they_read(monkeypatch):
    """A clone's first call runs only the clip's last `conv_stack_frames` (10) through the convolutions after the
    transformer: exact at that bound, not two frames short of it (so the shortcut is taken, and the bound matters)."""
    from vocalis.stages.models.qwen3_tts.config import DecoderConfig

    clip, frames = codes(CLIP, 11), codes(4, 12)
    policy = ChunkPolicy(first_chunk_frames=2, chunk_frames=2, left_context_frames=0)
    bound = modules("base-1b7").decoder.config.conv_stack_frames
    assert bound == 10
    (audio,), _ = stream(policy, [(request(clip), frames)])
    assert float((audio - whole(clip, frames)).abs().max()) <= exact(clip, frames)
    monkeypatch.setattr(DecoderConfig, "conv_stack_frames", property(lambda self: bound - 2))
    (short,), _ = stream(policy, [(request(clip), frames)])
    assert float((short - whole(clip, frames)).abs().max()) > exact(clip, frames)  # measured 2.9e-5
