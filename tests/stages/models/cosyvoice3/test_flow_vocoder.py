"""The shared flow-matching decoder and HiFT vocoder (stages/layers/flow_*.py, hift.py, stages/models/cosyvoice_common/flow_vocoder.py) on
the tiny CosyVoice3 weights, and the flow's primed voices (stages/models/cosyvoice_common/primed_voices.py).

No upstream package installs, so the DiT and the Euler/CFG solver are checked against a plain-torch reading of the
published architecture written here independently (explicit softmax attention, complex-number rotary, a loop over
the cosine schedule; tests/goldens/cosyvoice3/plain_flow.py, which bench/real_size_reference.py runs too) with recorded
noise, and the flow's whole-utterance inference (token features, speaker projection, prompt, guidance) likewise; the vocoder by its published properties (causality and lookahead, fixed
noise, length). Streaming: a ChunkStage decode equals the whole-utterance decode across chunk boundaries while
computing a bounded amount per chunk, and a request's audio does not depend on what else is in its batch.

The equality is checked in float64. The vocoder's source integrates F0 over the whole utterance, so in float32 any
rounding difference in the mel (a matmul over a different number of frames: ~1e-6) drifts the harmonics' phase:
the whole decode against itself with 1e-6 noise added to its mel differs by up to 2e-2 on these weights.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from tests.goldens.cosyvoice3.plain_flow import flow_state, reference_dit, reference_mel
from tests.tolerance import Trace, rounding_bound, traced
from vocalis.stages.components.flow_matching import FlowStream
from vocalis.stages.models.cosyvoice_common.flow_vocoder import FlowConditioning, FlowVocoderDecoder
from vocalis.stages.models.cosyvoice_common.primed_voices import PrimedVoices
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import CacheStats, StageItem


def test_dit_matches_a_plain_reading(modules):
    decoder = modules.flow.decoder
    estimator = decoder.estimator
    state = {"estimator." + k: v for k, v in estimator.state_dict().items()}
    generator = torch.Generator().manual_seed(3)
    length = 21  # crosses two 8-frame attention chunks and ends inside a third
    x, mu, cond = (torch.randn(2, 80, length, generator=generator) for _ in range(3))
    t, spks = torch.tensor([0.3, 0.9]), torch.randn(2, 80, generator=generator)
    with torch.inference_mode(), traced() as path:
        ours = estimator(x, mu, t, spks, cond)
    expected = reference_dit(state, 2, 16, estimator.static_chunk_size, x, mu, t, spks, cond)
    # Fused attention and module calls against explicit matmuls: the same sums in other orders, so within the
    # rounding of the DiT's path (float32, its peak operand, every linear, convolution, attention and norm chained).
    assert (ours - expected).abs().max() <= rounding_bound(torch.float32, path.peak, path.steps)


def test_euler_solver_with_cosine_schedule_and_guidance_matches_a_plain_loop(modules):
    decoder = modules.flow.decoder
    generator = torch.Generator().manual_seed(4)
    mu, cond, noise = (torch.randn(1, 80, 12, generator=generator) for _ in range(3))
    spks = torch.randn(1, 80, generator=generator)
    steps, rate = 4, decoder.inference_cfg_rate
    with torch.inference_mode():
        with traced() as path:
            ours = decoder(mu, spks, cond, steps, noise)
        times = [1 - math.cos(i / steps * 0.5 * math.pi) for i in range(steps + 1)]
        x = noise.clone()
        for i in range(steps):
            t = torch.tensor([times[i]])
            v_cond = decoder.estimator(x, mu, t, spks, cond)
            v_free = decoder.estimator(x, torch.zeros_like(mu), t, torch.zeros_like(spks), torch.zeros_like(cond))
            x = x + (times[i + 1] - times[i]) * ((1 + rate) * v_cond - rate * v_free)
    # the batched (conditioned + free) pass against two separate ones: float32 over every step's DiT
    assert (ours - x).abs().max() <= rounding_bound(torch.float32, path.peak, path.steps)


def test_whole_flow_matches_a_plain_reading(modules, tiny_checkpoint):
    """`CausalMaskedDiffWithDiT.inference` against the plain reading of the published whole-utterance flow, on flow.pt
    as published: token features through the pre-lookahead layer, the normalised speaker projection, the prompt mel
    as condition, guided and free rows, the fixed start noise."""
    flow = modules.flow
    state = flow_state(torch.load(tiny_checkpoint / "flow.pt", map_location="cpu", weights_only=True))
    cond = conditioning(modules, prompt_tokens=7, seed=15)
    tokens = torch.randint(0, 64, (11,), generator=torch.Generator().manual_seed(16))
    with torch.inference_mode():
        with traced() as path:
            ours = flow.inference(tokens[None], cond.prompt_tokens[None], cond.prompt_mel[None], cond.embedding[None], 3)
        expected = reference_mel(state, flow.decoder.estimator.static_chunk_size, flow.token_mel_ratio, tokens, cond.prompt_tokens,
                                 cond.prompt_mel, cond.embedding, 3, flow.decoder.rand_noise, flow.decoder.inference_cfg_rate)
    assert ours.shape == expected.shape == (1, 80, 22)
    assert (ours - expected).abs().max() <= rounding_bound(torch.float32, path.peak, path.steps)


def test_fixed_start_noise_is_the_published_seed_0_draw(modules):
    expected = torch.randn([1, 80, 50 * 300], generator=torch.Generator().manual_seed(0))
    assert torch.equal(modules.flow.decoder.rand_noise, expected)


def test_vocoder_is_causal_with_five_mel_frames_of_lookahead(modules):
    hift = modules.hift
    mel = torch.randn(1, 80, 30, generator=torch.Generator().manual_seed(5))
    changed = mel.clone()
    changed[:, :, 20:] += 1.0
    with torch.inference_mode():
        a, b = hift(mel), hift(changed)
    hop = hift.samples_per_frame
    assert a.shape == (1, 30 * hop) and 0.0 < a.abs().max() <= 0.99
    assert torch.equal(a[:, : 15 * hop], b[:, : 15 * hop])  # frames < 15 read at most up to frame 19
    assert not torch.equal(a[:, 15 * hop : 20 * hop], b[:, 15 * hop : 20 * hop])  # ... but they do read ahead
    with torch.inference_mode():
        assert torch.equal(hift(mel), a)  # fixed source noise: the same mel, the same samples


def conditioning(modules, prompt_tokens: int = 10, seed: int = 6) -> FlowConditioning:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 64, (prompt_tokens,), generator=generator)
    return FlowConditioning(tokens, torch.randn(2 * prompt_tokens, 80, generator=generator) - 4, torch.randn(192, generator=generator))


class _Output:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


def stream(decoder: FlowVocoderDecoder, requests: dict, policy: ChunkPolicy, max_num_seqs: int = 4, piece: int = 5,
           live: bool = False) -> dict:
    """Every request's tokens fed in pieces, decoded by a ChunkStage; returns each one's samples. live: the stage
    steps after each piece (as tokens arrive from the LM); otherwise all pieces are there before the first step."""
    stage = ChunkStage("flow", decoder, policy, max_num_seqs=max_num_seqs)
    out = {key: (SynthesisRequest(text=key, stage_input=cond, output=_Output()), []) for key, (_, cond) in requests.items()}
    by_id = {id(request): samples for request, samples in out.values()}

    def run() -> None:
        with torch.inference_mode():
            while stage.has_work():
                for item in stage.step():
                    if item.payload is not None:
                        by_id[id(item.request)].append(torch.as_tensor(item.payload))

    pieces = {key: list(tokens.split(piece)) for key, (tokens, _) in requests.items()}
    for index in range(max(len(p) for p in pieces.values())):
        for key, (request, _) in out.items():
            if index < len(pieces[key]):
                stage.add(StageItem(request, pieces[key][index][:, None], finished=index == len(pieces[key]) - 1))
        if live:
            run()
    run()
    return {key: torch.cat(samples) for key, (_, samples) in out.items()}


def float64_decode_bound(path: Trace, whole: torch.Tensor) -> float:
    """A float64 decode (streamed or whole) emits float32 samples: one rounding each side (the cast: eps * max |sample|)
    plus float64 rounding along the path. The vocoder's phase integral amplifies a perturbation of the mel by about
    2e4 (1e-6 of mel noise moves the float32 samples by 2e-2, as the module's docstring says), a factor the float64
    term can take: 2e4 times it is still below the cast's."""
    return rounding_bound(torch.float32, float(whole.abs().max()), 1) + 2e4 * rounding_bound(torch.float64, path.peak, path.steps)


@pytest.fixture(scope="module")
def decoder(modules):
    return FlowVocoderDecoder(modules.flow, modules.hift, lambda request: request.stage_input, n_timesteps=3)


@pytest.fixture(scope="module")
def double_decoder(modules):
    return FlowVocoderDecoder(copy.deepcopy(modules.flow).double(), copy.deepcopy(modules.hift).double(), lambda request: request.stage_input,
                              n_timesteps=3)


@pytest.mark.parametrize("live", [False, True], ids=["all-tokens-there", "tokens-arriving"])
def test_streamed_equals_whole_utterance_across_chunk_boundaries(modules, double_decoder, live):
    decoder = double_decoder
    # 70 tokens: the flow holds several 8-frame attention chunks, and the vocoder's windows start past frame 0
    tokens = torch.randint(0, 64, (70,), generator=torch.Generator().manual_seed(7))
    cond = conditioning(modules)
    with torch.inference_mode(), traced() as path:
        whole = decoder.decode_one(tokens, cond)
    tolerance = float64_decode_bound(path, whole)
    exact = ChunkPolicy(first_chunk_frames=1, chunk_frames=3, left_context_frames=10_000, lookahead_frames=decoder.exact_lookahead_tokens)
    streamed = stream(decoder, {"a": (tokens, cond)}, exact, piece=1 if live else 5, live=live)["a"]
    assert streamed.shape == (70 * decoder.samples_per_frame,)
    assert (streamed - whole.float()).abs().max() <= tolerance
    short = ChunkPolicy(first_chunk_frames=1, chunk_frames=3, left_context_frames=10_000, lookahead_frames=0)
    assert (stream(decoder, {"a": (tokens, cond)}, short)["a"] - whole.float()).abs().max() > 1e-3  # the lookahead is needed


def test_each_chunk_computes_a_bounded_number_of_frames(modules, double_decoder, monkeypatch):
    """Per chunk, the DiT runs over the new frames only (not the utterance so far) and the vocoder over a window
    of its context + the chunk + 5 frames; the equality above holds with no left context given to the decoder."""
    decoder = double_decoder
    assert decoder.streams_incrementally  # chunk-causal DiT + causal HiFT
    estimator, hift = decoder.flow.decoder.estimator, decoder.hift
    dit_frames, vocoder_frames = [], []
    forward_after, hift_decode = estimator.forward_after, hift.decode
    monkeypatch.setattr(estimator, "forward_after", lambda past, x, *rest: dit_frames.append(x.shape[2]) or forward_after(past, x, *rest))
    monkeypatch.setattr(hift, "decode", lambda mel, source: vocoder_frames.append(mel.shape[2]) or hift_decode(mel, source))
    tokens = torch.randint(0, 64, (120,), generator=torch.Generator().manual_seed(9))
    cond = conditioning(modules)
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=3, max_chunk_frames=3, left_context_frames=0,
                         lookahead_frames=decoder.exact_lookahead_tokens)
    streamed = stream(decoder, {"a": (tokens, cond)}, policy, piece=1, live=True)["a"]
    ratio, chunk = decoder.flow.token_mel_ratio, estimator.static_chunk_size
    steps = 3
    # the first chunk computes the prompt's frames too, the last one emits the rest of the lookahead
    assert len(dit_frames) == steps * len(vocoder_frames) and len(vocoder_frames) > 30
    middle = dit_frames[steps:-steps]
    assert max(middle) <= (3 + decoder.exact_lookahead_tokens) * ratio + chunk  # new tokens, lookahead, an unfinished attention chunk
    context = decoder.hift.context_frames + decoder.hift.f0_predictor.context_frames
    assert max(vocoder_frames[:-1]) <= context + 3 * ratio + 5 < 120 * ratio / 2
    with torch.inference_mode(), traced() as path:
        whole = decoder.decode_one(tokens, cond)
    assert (streamed - whole.float()).abs().max() <= float64_decode_bound(path, whole)


def test_a_requests_audio_does_not_depend_on_its_batch(modules, decoder):
    policy = ChunkPolicy(first_chunk_frames=2, chunk_frames=4, left_context_frames=10_000, lookahead_frames=decoder.exact_lookahead_tokens)
    generator = torch.Generator().manual_seed(8)
    target = (torch.randint(0, 64, (14,), generator=generator), conditioning(modules, 10, 1))
    others = {f"o{i}": (torch.randint(0, 64, (9 + 3 * i,), generator=generator), conditioning(modules, 6 + i, 2 + i)) for i in range(3)}
    alone = stream(decoder, {"t": target}, policy)["t"]
    batched = stream(decoder, {"t": target, **others}, policy)["t"]
    assert torch.equal(alone, batched)


def test_a_voices_later_requests_start_after_its_primed_prompt_and_equal_the_whole_decode(modules, monkeypatch):
    """With `prompt_cache_bytes`, a voice's first request primes the flow over its prompt's final frames and keeps a
    copy; a later request in that voice starts its DiT after them (fewer frames computed) and both still equal the
    whole-utterance decode (float64, as above)."""
    decoder = FlowVocoderDecoder(copy.deepcopy(modules.flow).double(), copy.deepcopy(modules.hift).double(),
                                 lambda request: request.stage_input, n_timesteps=3, prompt_cache_bytes=1 << 30)
    estimator = decoder.flow.decoder.estimator
    dit_frames: list[int] = []
    forward_after = estimator.forward_after
    monkeypatch.setattr(estimator, "forward_after", lambda past, x, *rest: dit_frames.append(x.shape[2]) or forward_after(past, x, *rest))
    cond = conditioning(modules, prompt_tokens=30, seed=10)  # 60 prompt frames: 48 final ones (8-frame chunks, lookahead 3 tokens)
    generator = torch.Generator().manual_seed(11)
    first, second = (torch.randint(0, 64, (20,), generator=generator) for _ in range(2))
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=5, left_context_frames=0, lookahead_frames=decoder.exact_lookahead_tokens)
    computed = []
    for tokens in (first, second):
        dit_frames.clear()
        streamed = stream(decoder, {"a": (tokens, cond)}, policy)["a"]
        computed.append(sum(dit_frames))
        with torch.inference_mode(), traced() as path:
            whole = decoder.decode_one(tokens, cond)
        assert (streamed - whole.float()).abs().max() <= float64_decode_bound(path, whole)
    steps, primed = 3, decoder.primed
    assert len(primed) == 1 and primed.hits == 1
    # the same chunks after the primed frames; the first request computed those too, in its priming call, and no
    # more than a decoder that keeps nothing
    assert computed[0] - computed[1] == steps * 48
    dit_frames.clear()
    decoder.primed = PrimedVoices(0)
    stream(decoder, {"a": (first, cond)}, policy)
    assert sum(dit_frames) == computed[0]


def test_primed_voices_keep_to_their_budget_least_recently_used_out(modules):
    voices = [conditioning(modules, prompt_tokens=30, seed=seed) for seed in (12, 13)]

    def make(cond):
        return lambda: FlowStream(modules.flow, cond.prompt_tokens, cond.prompt_mel, cond.embedding, 2)

    with torch.inference_mode():
        one = PrimedVoices(1 << 30).stream(voices[0], make(voices[0]))
        assert one.held == 48
        room = PrimedVoices(one.nbytes)  # one voice's frames
        for cond in (voices[0], voices[1], voices[1]):
            room.stream(cond, make(cond))
        # voice 0 kept, then out for voice 1 (a miss each), then voice 1 again (a hit); the bytes are what voice 1's
        # kept fork holds (a fork holds its frames only, no spare room)
        assert room.stats() == CacheStats(hits=1, misses=2, entries=1, nbytes=one.fork().nbytes) and len(room) == 1
        forked = room.stream(voices[1], make(voices[1]))
        forked.advance(torch.randint(0, 64, (12,), generator=torch.Generator().manual_seed(14)))
        assert forked.held > 48 and room.stream(voices[1], make(voices[1])).held == 48  # a fork's frames are its own
        off = PrimedVoices(0)
        assert off.stream(voices[0], make(voices[0])).held == 0 and len(off) == 0
