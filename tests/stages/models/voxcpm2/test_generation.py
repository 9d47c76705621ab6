"""VoxCPM2 on the shared runtime: batching, seeds, lengths, and chunked (streamed) VAE decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.goldens.voxcpm2.cases import NullOutput, case_input, case_request, generate, generator_stage, load_family, tensor
from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Input
from vocalis.stages.models.voxcpm2.runtime import MAX_PATCHES_PER_TOKEN, MIN_DEFAULT_PATCHES
from vocalis.stages.models.voxcpm2.vae import receptive_field_frames
from vocalis.stages.runtime.chunk_stage import ChunkStage
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


@pytest.fixture(scope="module")
def tiny():
    return load_family("tiny")


@pytest.fixture(scope="module")
def long():
    return load_family("long")


def request(text: str, stage_input: VoxCPM2Input) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=stage_input, output=NullOutput())


def decode_chunked(family, request, patches: torch.Tensor, policy: ChunkPolicy, arrivals: int = 1) -> tuple[np.ndarray, list[int]]:
    """Feed patches to a ChunkStage `arrivals` at a time, stepping as it can; the audio and each chunk's length."""
    stage = ChunkStage("audio_vae", family.decoder, policy)
    pieces = []
    with torch.inference_mode():
        for start in range(0, len(patches), arrivals):
            stage.add(StageItem(request, patches[start : start + arrivals], finished=start + arrivals >= len(patches)))
            while stage.has_work():
                pieces += [item.payload for item in stage.step() if item.payload is not None]
    return np.concatenate(pieces), [len(p) for p in pieces]


def whole_decode(family, request, patches: torch.Tensor) -> np.ndarray:
    context = family.decoder.context_frames(request)
    frames = patches if context is None else torch.cat([context, patches])
    with torch.inference_mode():
        audio = family.decoder.decode(frames[None], [family.decoder.start(request)])[0].numpy()
    return audio[(len(frames) - len(patches)) * family.decoder.samples_per_frame :]


@pytest.mark.parametrize(("config", "name"), [("tiny", "zero_shot"), ("long", "zero_shot"), ("long", "continuation")])
def test_streamed_equals_whole_decode(tiny, long, config, name):
    family = {"tiny": tiny, "long": long}[config]
    r = case_request(config, name)
    patches = tensor(config, name, "patches")
    with traced() as path:
        whole = whole_decode(family, r, patches)
    context = family.decoder.context_patches
    policy = ChunkPolicy(first_chunk_frames=1, chunk_frames=2, left_context_frames=context, growth=1.5, max_chunk_frames=5)
    streamed, sizes = decode_chunked(family, r, patches, policy)
    hop = family.decoder.samples_per_frame
    assert sizes[0] == hop and len(sizes) >= 4 and sum(sizes) == len(patches) * hop
    prefix = 0 if family.decoder.context_frames(r) is None else len(family.decoder.context_frames(r))
    assert any(w.context_start > 0 for w in windows(policy, prefix, prefix + len(patches)))  # some chunks cut their left context
    # chunk shapes change the float32 rounding (1.3e-6 on an AVX-512 Xeon): float32 over the decode's path
    np.testing.assert_allclose(streamed, whole, atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def windows(policy: ChunkPolicy, emitted: int, total: int) -> list:
    found = []
    while (window := policy.next_window(emitted, total, True, len(found))) is not None:
        found.append(window)
        emitted = window.end
    return found


def test_left_context_shorter_than_the_receptive_field_is_not_exact(long):
    """The receptive field is tight: one patch less context and chunk starts change (the test above is sensitive)."""
    r = case_request("long", "zero_shot")
    patches = tensor("long", "zero_shot", "patches")
    short = long.decoder.context_patches - 2
    streamed, _ = decode_chunked(long, r, patches, ChunkPolicy(first_chunk_frames=1, chunk_frames=2, left_context_frames=short))
    assert np.abs(streamed - whole_decode(long, r, patches)).max() > 1e-4
    assert receptive_field_frames(long.modules.config.audio_vae) == 21


def test_continuation_stream_starts_after_the_prompt_context(tiny):
    """Prompt patches are decoded as context, never emitted: the stream is exactly the generated audio."""
    r = case_request("tiny", "continuation")
    patches = tensor("tiny", "continuation", "patches")
    assert len(tiny.decoder.context_frames(r)) == 3
    with traced() as path:  # every chunk counted: an overestimate
        streamed, sizes = decode_chunked(tiny, r, patches, ChunkPolicy(first_chunk_frames=1, chunk_frames=4, left_context_frames=tiny.decoder.context_patches))
    assert sum(sizes) == len(patches) * tiny.decoder.samples_per_frame
    waveform = tensor("tiny", "continuation", "waveform").numpy()
    np.testing.assert_allclose(streamed, waveform, atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)


def test_batch_invariance_across_modes_and_settings(tiny):
    """Requests of every mode, with different guidance and step counts, batched together = each alone."""
    names = ["zero_shot", "reference", "continuation", "ref_continuation"]
    alone, tolerance = {}, 0.0
    for name in names:
        r = case_request("tiny", name)
        with traced() as path:  # free-running: each step starts from the last, all chained
            alone[name] = generate(generator_stage(tiny), [r])[id(r)]
        tolerance = max(tolerance, rounding_bound(torch.float32, path.peak, path.steps))
    together = [case_request("tiny", name) for name in names]
    batched = generate(generator_stage(tiny, max_num_seqs=4, budget=64), together)  # prefills chunked beside decodes
    for name, r in zip(names, together, strict=True):
        torch.testing.assert_close(batched[id(r)], alone[name], atol=tolerance, rtol=0)


def test_seeded_noise_reproduces_and_differs_by_seed(tiny):
    def run(seed):
        r = case_request("tiny", "zero_shot", inject_noise=False, seed=seed, max_new_tokens=6)
        return generate(generator_stage(tiny), [r])[id(r)]

    a, b, c = run(7), run(7), run(8)
    assert torch.equal(a, b) and not torch.allclose(a, c)
    unseeded = run(None)
    assert unseeded.shape == a.shape and torch.isfinite(unseeded).all()


def test_noise_is_drawn_per_request_whatever_the_batch(tiny):
    solo = case_request("tiny", "zero_shot", inject_noise=False, seed=3, max_new_tokens=5)
    with traced() as path:
        expected = generate(generator_stage(tiny), [solo])[id(solo)]
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    target = case_request("tiny", "zero_shot", inject_noise=False, seed=3, max_new_tokens=5)
    others = [case_request("tiny", "reference", inject_noise=False, seed=s, max_new_tokens=5) for s in (1, 2)]
    torch.testing.assert_close(generate(generator_stage(tiny), [others[0], target, others[1]])[id(target)], expected, atol=tolerance, rtol=0)


def test_default_length_follows_the_text_and_the_stop_head_ends_early(tiny):
    text = "hello world"
    r = request(text, VoxCPM2Input(seed=1))
    expected = int(len(tiny.modules.tokenizer.encode(text)) * MAX_PATCHES_PER_TOKEN + MIN_DEFAULT_PATCHES)
    assert tiny.generator.start(r).sampling.max_new_tokens == expected
    patches = generate(generator_stage(tiny), [request(text, VoxCPM2Input(seed=1))])
    (produced,) = patches.values()
    assert 3 <= len(produced) < expected  # min_len 2: at least 3 patches; random stop head fires long before the cap


def test_min_len_holds_the_stop_head_off(tiny):
    r = request("hello world", VoxCPM2Input(seed=1, min_len=20, max_new_tokens=25))
    assert len(generate(generator_stage(tiny), [r])[id(r)]) >= 21


def test_precomputed_latents_stand_in_for_audio(tiny):
    """A voice given as latents (a precomputed voice's artifacts) prompts exactly like its audio."""
    audio_input = case_input("tiny", "continuation")
    latents = tiny.voices.latents(audio_input.prompt, "left")
    from vocalis.stages.models.voxcpm2.voices import VoiceClip

    as_latents = case_input("tiny", "continuation", prompt=VoiceClip(latents=latents.clone()))
    a = request("and then it continues.", audio_input)
    b = request("and then it continues.", as_latents)
    with traced() as path:  # both rows' steps counted: an overestimate
        out = generate(generator_stage(tiny), [a, b])
    torch.testing.assert_close(out[id(a)], out[id(b)], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
    assert torch.equal(tiny.decoder.context_frames(b), latents[-3:])


def test_bfloat16_generator_follows_the_float32_reference():
    """As deployed on GPUs (the checkpoint's dtype): the LMs and LocDiT in bfloat16, the VAE in float32,
    continuation context frames cast to the patches' dtype. Close to the float32 reference, not equal."""
    family = load_family("tiny", dtype=torch.bfloat16)
    r = case_request("tiny", "continuation")
    patches = generate(generator_stage(family), [r])[id(r)]
    assert patches.dtype == torch.bfloat16 and family.decoder.context_frames(r).dtype == torch.bfloat16
    audio, _ = decode_chunked(family, r, patches, ChunkPolicy(first_chunk_frames=1, chunk_frames=2, left_context_frames=11), arrivals=3)
    golden = tensor("tiny", "continuation", "waveform").numpy()
    assert audio.dtype == np.float32 and audio.shape == golden.shape
    assert np.corrcoef(audio, golden)[0, 1] > 0.95
