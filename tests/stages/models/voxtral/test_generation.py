"""Stage 0 and stage 1 of the tiny checkpoint run directly: the stop rule, seeds and injected noise, batch
invariance of the codes, and chunked decoding equal to a whole-utterance decode."""

from __future__ import annotations

import copy

import numpy as np
import torch

from tests.goldens.voxtral.build_tiny import build
from tests.stages.models.voxtral.conftest import generate, request
from tests.tolerance import rounding_bound, traced
from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
from vocalis.stages.models.voxtral.config import END_AUDIO
from vocalis.stages.models.voxtral.runtime import FrameGenerator
from vocalis.stages.models.voxtral.weights import load_modules
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.stage import StageItem

TEXT = "Hello world, this is a tiny voice."


def test_end_audio_ends_the_utterance_and_is_not_emitted(tiny):
    lm = copy.deepcopy(tiny.modules.lm)
    lm.flow.semantic_codebook_output.weight.data.zero_()  # all logits tie: [EMPTY_AUDIO] is masked, [END_AUDIO] wins
    generator = FrameGenerator(lm, tiny.modules.tekken, tiny.modules.voices, 256)
    r = request(TEXT, seed=1, max_new_tokens=10)
    (frames,) = generate(generator, [r]).values()
    assert len(frames) == 0 and r.output_tokens == 0
    assert int(generator.last_semantic_logits.argmax()) == END_AUDIO


def test_frames_are_codes_in_range_and_the_length_is_max_new_tokens(tiny):
    (frames,) = generate(tiny.generator, [request(TEXT, seed=1, max_new_tokens=9)]).values()
    assert frames.shape == (9, 37)
    assert ((frames[:, 0] >= 2) & (frames[:, 0] < 2 + 64)).all() and ((frames[:, 1:] >= 2) & (frames[:, 1:] <= 22)).all()


def test_seed_reproduces_injected_noise_is_used_and_cfg_matters(tiny):
    def run(**fields):
        (frames,) = generate(tiny.generator, [request(TEXT, max_new_tokens=6, **fields)]).values()
        return frames

    a, b, c = run(seed=7), run(seed=7), run(seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    noise = torch.randn(6, 36, generator=torch.Generator().manual_seed(3))
    assert torch.equal(run(noise=noise), run(noise=noise, seed=99))  # injected noise overrides the seed
    assert not torch.equal(run(seed=7, cfg_alpha=3.0), a)


def test_codes_are_batch_invariant_with_chunked_prefill_and_late_joiners(tiny):
    specs = [dict(voice="neutral_female", seed=7, max_new_tokens=8), dict(voice="casual_male", seed=3, max_new_tokens=5),
             dict(voice="fr_female", seed=5, max_new_tokens=7, cfg_alpha=2.0)]
    texts = [TEXT, TEXT, "Another sentence entirely, a little longer than the others."]
    alone = [generate(tiny.generator, [r])[id(r)] for r in (request(t, **s) for t, s in zip(texts, specs, strict=True))]
    together = [request(t, **s) for t, s in zip(texts, specs, strict=True)]
    batched = generate(tiny.generator, together, budget=16)  # prompts prefill in 16-token chunks beside others' decodes
    for r, expected in zip(together, alone, strict=True):
        assert torch.equal(batched[id(r)], expected)


def random_frames(count: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    frames = torch.randint(2, 23, (count, 37), generator=g)
    frames[:, 0] = torch.randint(2, 66, (count,), generator=g)
    return frames


def decode_chunked(decoder: StatefulCodecDecoder, frames: torch.Tensor, policy: ChunkPolicy) -> tuple[np.ndarray, list[int]]:
    stage = ChunkStage("audio_tokenizer", decoder, policy)
    r = request(TEXT)
    pieces = []
    with torch.inference_mode():
        for i in range(len(frames)):
            stage.add(StageItem(r, frames[i : i + 1], finished=i + 1 == len(frames)))
            while stage.has_work():
                pieces += [item.payload for item in stage.step() if item.payload is not None]
    return np.concatenate(pieces), [len(p) // decoder.samples_per_frame for p in pieces]


def test_streamed_chunks_equal_the_whole_decode(tiny):
    decoder = StatefulCodecDecoder(tiny.modules.codec, tiny.modules.codec.args.samples_per_frame)
    frames = random_frames(64)
    with torch.inference_mode(), traced() as path:
        whole = tiny.modules.codec(frames[None])[0].numpy()
    assert whole.shape == (64 * 1920,)
    # the same layers over other lengths: float32 over the codec's path, at the samples' magnitude (well-conditioned:
    # test_codec_stream.py's `exact`)
    tolerance = rounding_bound(torch.float32, float(np.abs(whole).max()), path.steps)
    streamed, sizes = decode_chunked(decoder, frames, ChunkPolicy(first_chunk_frames=5, chunk_frames=25, left_context_frames=25,
                                                                   max_chunk_frames=25))
    assert sizes == [5, 25, 25, 9]
    np.testing.assert_allclose(streamed, whole, atol=tolerance, rtol=0)
    # the decoder streams from each request's carried state: no left context is needed (the deployed 0), none is read
    stateful, _ = decode_chunked(decoder, frames, ChunkPolicy(first_chunk_frames=5, chunk_frames=25, left_context_frames=0, max_chunk_frames=25))
    np.testing.assert_allclose(stateful, whole, atol=tolerance, rtol=0)


RECEPTIVE_FIELD_FRAMES = 21
"""Earlier frames that reach a frame's samples through the published decoder (measured on the tiny one, which keeps
its kernels, strides and windows): conv 3 at the frame rate, then per stage 2 layers of windows 2, 4, 8, 16
positions at 1, 2, 4, 8 positions per frame, transposed convs between stages and the 7-tap output conv."""


def test_the_decoder_is_causal_with_the_stated_receptive_field(tiny):
    frames = random_frames(48, seed=1)
    changed = frames.clone()
    changed[10] = random_frames(1, seed=2)[0]
    with torch.inference_mode():
        a, b = tiny.modules.codec(frames[None])[0], tiny.modules.codec(changed[None])[0]
    differs = (a != b).view(48, 1920).any(dim=1)
    assert not differs[:10].any()  # causal
    assert differs[10 + RECEPTIVE_FIELD_FRAMES] and not differs[11 + RECEPTIVE_FIELD_FRAMES :].any()  # exactly that far


def test_cloning_with_the_encoder_fills_the_prompt_with_the_clips_frames(tmp_path):
    """A checkpoint with the audio tokenizer's encoder (none is published) clones: a clip's codes (its frames and the
    [END_AUDIO] frame) fill the prompt's [AUDIO] rows, resampled to 24 kHz first; another clip, other frames."""
    modules = load_modules(build(tmp_path / "full", encoder=True))
    generator = FrameGenerator(modules.lm, modules.tekken, modules.voices, 256, modules.encoder, modules.codec.quantizer)
    t = np.arange(16000) / 16000
    clip = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)  # 1 s at 16 kHz: 13 frames at 24 kHz
    with torch.inference_mode():
        codes = modules.encoder.codes(torch.from_numpy(clip), modules.codec.quantizer)  # read as 24 kHz: 9 frames + end
    assert codes.shape == (10, 37) and torch.equal(codes[-1], torch.tensor([END_AUDIO] + [0] * 36))
    assert ((codes[:-1, 0] >= 2) & (codes[:-1, 0] < 66)).all() and ((codes[:-1, 1:] >= 2) & (codes[:-1, 1:] <= 22)).all()
    embeds = generator.clone_embeds(TEXT, clip, 16000)
    assert len(embeds) == len(modules.tekken.speech_prompt_rows(TEXT, 14).ids)  # 13 frames + [END_AUDIO]

    def run(samples):
        (frames,) = generate(generator, [request(TEXT, voice="", reference=(samples, 16000), seed=1, max_new_tokens=5)]).values()
        return frames

    first = run(clip)
    assert first.shape == (5, 37)
    assert torch.equal(first, run(clip)) and not torch.equal(first, run(clip[::-1].copy()))
