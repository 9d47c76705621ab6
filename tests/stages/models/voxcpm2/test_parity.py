"""VoxCPM2 against the official `voxcpm` 2.0.3 on tiny random checkpoints (tests/goldens/voxcpm2/make_goldens.py).

Every case is compared part by part: tokenizer ids, the prompt layout, the VAE encoding of the clips,
the base LM over the prompt, then per generation step the stop logits and the patch latents with the
reference's flow-matching noise injected (teacher-forced: each step starts from the reference's
previous patch, so one step's error cannot compound), the VAE decode of the reference's latents, and
finally the free-running pipeline's waveform. Tolerances are float32 rounding along each compared path
(tests/tolerance.py), which holds on any CPU.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from tests.goldens.voxcpm2.cases import (
    CONFIGS,
    HERE,
    Family,
    all_cases,
    case,
    case_input,
    case_request,
    generate,
    generator_stage,
    load_family,
    summary,
    tensor,
)
from tests.tolerance import Trace, rounding_bound, traced
from vocalis.stages.models.voxcpm2.runtime import LatentGenerator
from vocalis.stages.runtime.chunk_stage import ChunkStage, DecodeStream
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.stage import StageItem


def bound(path: Trace, steps: int | None = None) -> float:
    """float32 rounding along a traced path; `steps` where fewer than all its roundings chain to one output."""
    return rounding_bound(torch.float32, path.peak, steps or path.steps)


def encoding_bound(family: Family, config: str, name: str) -> float:
    """float32 rounding along the VAE encoding of a case's clips, traced afresh (the voices cache their latents);
    0 without clips (nothing rounded)."""
    c, inputs = case(config, name), case_input(config, name)
    clips = [(inputs.reference, "right")] if c.get("reference") else []
    clips += [(inputs.prompt, "left")] if c.get("prompt") else []
    with traced() as path:
        for clip, pad in clips:
            family.voices._encode(clip, pad)
    return bound(path) if path.steps else 0.0


class TeacherForced(LatentGenerator):
    """Records each step's own patch and stop logits, then continues from the reference's patch."""

    golden: torch.Tensor | None = None
    recorded: list[tuple[torch.Tensor, torch.Tensor]]

    def sample_frames(self, hidden, samplers, histories, states):
        step = states[0].step
        ours = super().sample_frames(hidden, samplers, histories, states)
        self.recorded.append((ours[0].clone(), self.last_stop_logits[0].clone()))
        forced = self.golden[step : step + 1].to(ours.dtype)
        states[0].previous = forced[0]
        return forced


@pytest.fixture(scope="module")
def families() -> dict[str, Family]:
    return {config: load_family(config) for config in CONFIGS}


@pytest.fixture(scope="module")
def forced_families() -> dict[str, Family]:
    return {config: load_family(config, TeacherForced) for config in CONFIGS}


def test_goldens_belong_to_the_committed_checkpoints():
    """The sha256 of every checkpoint, clip and golden file as make_goldens.py wrote them."""
    for relative, digest in summary()["files"].items():
        assert hashlib.sha256((HERE / relative).read_bytes()).hexdigest() == digest, relative


@pytest.mark.parametrize("config", CONFIGS)
def test_tokenizer_ids(families, config):
    tokenizer = families[config].modules.tokenizer
    for text, ids in summary()["configs"][config]["tokenizer"].items():
        assert tokenizer.encode(text) == ids, text


@pytest.mark.parametrize(("config", "name"), all_cases())
def test_prompt_layout_and_clip_latents(families, config, name):
    family = families[config]
    layout, _ = family.generator.layout(case_request(config, name))
    assert torch.equal(layout.ids, tensor(config, name, "prompt_ids"))
    assert torch.equal(layout.is_audio.long(), tensor(config, name, "audio_mask"))
    assert torch.equal((~layout.is_audio).long(), tensor(config, name, "text_mask"))
    torch.testing.assert_close(layout.feats, tensor(config, name, "prompt_feats"), atol=encoding_bound(family, config, name), rtol=0)


@pytest.mark.parametrize(("config", "name"), [(c, n) for c, n in all_cases() if "reference" in case(c, n) or "prompt" in case(c, n)])
def test_vae_encoder(families, config, name):
    """The clip, resampled to 16 kHz and padded (right for a reference, left for a prompt), and its latents."""
    family = families[config]
    c = case(config, name)
    inputs = case_input(config, name)
    clips = [(inputs.reference, "right")] if c.get("reference") else []
    clips += [(inputs.prompt, "left")] if c.get("prompt") else []
    for i, (clip, pad) in enumerate(clips):
        latents = family.voices.latents(clip, pad)  # [N, P, D]
        expected = tensor(config, name, f"encode{i}_output")  # [D, N * P]
        torch.testing.assert_close(latents.permute(2, 0, 1).reshape(expected.shape), expected, atol=encoding_bound(family, config, name), rtol=0)


@pytest.mark.parametrize(("config", "name"), all_cases())
def test_base_lm_over_the_prompt(families, config, name):
    family = families[config]
    generator = family.generator
    request = case_request(config, name)
    packed = generator.start(request).prompt_embeds
    cache = PagedKVCache(generator.cache_shape, num_blocks=-(-len(packed) // 16), block_size=16)
    batch = cache.batch([list(range(cache.num_blocks))], [0], [len(packed)])
    with torch.inference_mode(), traced() as path:
        out = family.modules.model.base_lm.cached(packed[:, : generator.hidden], batch, cache)
    torch.testing.assert_close(out, tensor(config, name, "prefill_lm_out"), atol=bound(path), rtol=0)


@pytest.mark.parametrize(("config", "name"), all_cases())
def test_steps_teacher_forced(forced_families, config, name):
    """Per step: stop logits and the patch from the reference's noise, LM state and previous patch."""
    family = forced_families[config]
    generator = family.generator
    golden = tensor(config, name, "patches")
    generator.golden, generator.recorded = golden, []
    with traced() as path:
        generate(generator_stage(family), [case_request(config, name)])
    patches = torch.stack([p for p, _ in generator.recorded])
    stops = torch.stack([s for _, s in generator.recorded])
    assert len(patches) == len(golden) == case(config, name)["steps"]
    # teacher-forced, a step's outputs chain its own passes (and the prompt's): a step's share of the trace
    tolerance = bound(path, path.steps // len(golden))
    torch.testing.assert_close(stops, tensor(config, name, "stop_logits"), atol=tolerance, rtol=0)
    torch.testing.assert_close(patches, golden, atol=tolerance, rtol=0)


@pytest.mark.parametrize(("config", "name"), all_cases())
def test_vae_decode_of_the_reference_latents(families, config, name):
    family = families[config]
    latents = tensor(config, name, "vae_decode_input")  # [D, (context + steps) * P]
    patches = latents.T.reshape(-1, family.modules.config.patch_size, latents.shape[0])
    with torch.inference_mode(), traced() as path:
        audio = family.decoder.decode(patches[None], [DecodeStream()])[0]
    context = len(patches) - case(config, name)["steps"]
    torch.testing.assert_close(audio[context * family.decoder.samples_per_frame :], tensor(config, name, "waveform"), atol=bound(path), rtol=0)


@pytest.mark.parametrize(("config", "name"), all_cases())
def test_free_running_pipeline_waveform(families, config, name):
    """Generator and chunked VAE decode as served (the stop head live), against the reference's audio."""
    family = families[config]
    request = case_request(config, name)
    with traced() as generating:  # free-running: each step starts from the last, all chained
        patches = generate(generator_stage(family), [request])[id(request)]
    assert len(patches) == case(config, name)["steps"]
    torch.testing.assert_close(patches, tensor(config, name, "patches"), atol=bound(generating), rtol=0)
    chunks = ChunkStage("audio_vae", family.decoder, ChunkPolicy(first_chunk_frames=1, chunk_frames=3, left_context_frames=family.decoder.context_patches))
    chunks.add(StageItem(request, patches, finished=True))
    audio = []
    with torch.inference_mode(), traced() as decoding:  # every chunk counted: an overestimate
        while chunks.has_work():
            audio += [torch.as_tensor(item.payload) for item in chunks.step() if item.payload is not None]
    # the patches' own difference carried through the decode, plus the decode's rounding
    torch.testing.assert_close(torch.cat(audio), tensor(config, name, "waveform"), atol=bound(generating) + bound(decoding), rtol=0)


def test_natural_stop_keeps_the_stop_steps_patch(families):
    """With min_len 2 the reference stops at the first step after it whose stop head says so, keeping that patch."""
    golden = tensor("tiny", "zero_shot_stop", "stop_logits")
    first = next(i for i in range(3, len(golden)) if golden[i].argmax() == 1)
    assert case("tiny", "zero_shot_stop")["steps"] == first + 1 < case("tiny", "zero_shot_stop")["max_len"]
    request = case_request("tiny", "zero_shot_stop")
    patches = generate(generator_stage(families["tiny"]), [request])[id(request)]
    assert len(patches) == first + 1 and request.output_tokens == first + 1
