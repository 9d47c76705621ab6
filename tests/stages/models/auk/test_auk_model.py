"""AuK's model-side rules on the tiny checkpoints: chunked VAE decode equals a whole decode, every loaded tensor
matters, AuK-Flash locks its schedule (and says so), the adapter's field rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tolerance import rounding_bound, traced
from vocalis.stages.api.errors import InvalidField
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.auk.adapter import AuKAdapter
from vocalis.stages.models.auk.config import FLASH_T_GRID
from vocalis.stages.models.auk.dit import DiTBatch
from vocalis.stages.models.auk.loader import load_modules
from vocalis.stages.models.auk.schedule import time_grid
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

CONTEXT = 20
"""Left context past the tiny decoder's receptive field (the published three reach 49 frames, which deploy.yaml's 64
covers). Past a resblock kernel, the anti-aliasing filters' replicate padding at a chunk's start still reaches back a
little less at every upsampling level: in float64 a chunk behind 16 frames is 1e-5 off the whole decode (what the old
1e-5 bound let through on AVX-512 and not on AVX2), behind 17 4e-8, behind 19 at float64's own rounding."""


def test_chunked_decode_equals_the_whole_decode(tiny):
    _, _, _, vae, _ = tiny
    latents = torch.randn(1, 40, vae.config.latent_dim, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        with traced() as path:
            whole = vae.decode(latents)
        bounds = [0, 10, 25, 40]  # a small first chunk, then larger ones, each cut from the middle of the latents
        chunks = [vae.decode_chunk(latents, a, b, CONTEXT) for a, b in zip(bounds, bounds[1:], strict=False)]
        short = vae.decode_chunk(latents, 25, 40, 2)
    # The chunks run the same layers on shorter inputs, which the kernels may block and round differently: float32
    # over the decoder's path (every convolution's terms chained), at the magnitude of the samples compared (not of
    # the path's peak, 81: the decoder is well-conditioned, a float32 decode is 2.4e-6 off a float64 one).
    tolerance = rounding_bound(torch.float32, float(whole.abs().max()), path.steps)
    assert (torch.cat(chunks, dim=1) - whole).abs().max().item() <= tolerance
    assert (short - whole[:, 25 * vae.hop:]).abs().max().item() > 1e-4  # too little context shows: the check can fail


def _trainable_buffers(module: torch.nn.Module) -> None:
    """Buffers (filters, statistics, rotary frequencies) loaded from the checkpoint become leaves with gradients."""
    for owner in module.modules():
        for name, buffer in list(owner.named_buffers(recurse=False)):
            if buffer is not None and name in owner.state_dict():
                owner.register_buffer(name, buffer.detach().clone().requires_grad_(True))


def _checked(module: torch.nn.Module, loss: torch.Tensor) -> list[str]:
    tensors = dict(module.named_parameters()) | {n: b for n, b in module.named_buffers() if b.requires_grad}
    grads = torch.autograd.grad(loss, list(tensors.values()), allow_unused=True)
    return [name for (name, _), grad in zip(tensors.items(), grads, strict=True) if grad is None or grad.abs().sum() == 0]


def test_every_loaded_tensor_changes_some_output():
    config, encoder, dit, vae, prompts = load_modules(Path("tests/goldens/auk/tiny"))
    rng = torch.Generator().manual_seed(1)
    for module in (encoder, dit, vae):
        module.requires_grad_(True)
        _trainable_buffers(module)
    clip = torch.from_numpy(np.sin(np.arange(4000) / 16000 * 2 * np.pi * 200).astype(np.float32) * 0.3)  # 25 frames: 4 windows
    features = whisper_log_mel(clip, config.audio.num_mel_bins, zero_padded=True)
    from vocalis.stages.models.auk.encoder import audio_token_count

    ids = [torch.tensor(prompts.ids("Make it calm.", audio_token_count(features.shape[1]))), torch.tensor(prompts.ids("Say hi.", None))]
    conditions = encoder(ids, [features, None], config.audio_token_id)
    loss = sum((c * torch.randn(c.shape, generator=rng)).sum() for c in conditions)
    assert _checked(encoder, loss) == []
    batch = DiTBatch(x=torch.randn(2, 6, 8, generator=rng), ref=torch.randn(2, 4, 8, generator=rng),
                     text=dit.project_text(torch.randn(2, 5, 32, generator=rng)), time=torch.tensor([0.3, 0.7]),
                     x_len=torch.tensor([6, 4]), ref_len=torch.tensor([4, 2]), text_len=torch.tensor([5, 3]))
    velocity = dit(batch)
    assert _checked(dit, (velocity * torch.randn(velocity.shape, generator=rng)).sum()) == []
    wave = torch.sin(torch.arange(960) / 24000 * 2 * torch.pi * 180) * 0.4
    decoded = vae.decode(torch.randn(1, 6, 8, generator=rng))
    drawn = vae.encode(wave, torch.Generator().manual_seed(3))
    loss = (decoded * torch.randn(decoded.shape, generator=rng)).sum() + (drawn * torch.randn(drawn.shape, generator=rng)).sum()
    assert _checked(vae, loss) == []


def params(**fields) -> RequestParams:
    return RequestParams(model="auk", voice="", fields=fields)


def test_flash_locks_its_schedule_and_says_so():
    config = load_modules(Path("tests/goldens/auk/tiny-flash"))[0]
    assert config.flash
    adapter = AuKAdapter(config)
    asked = params(duration_seconds=1.0, extra_params={"num_inference_steps": 32, "guidance_scale": 3.0})
    schedule = adapter.stage_input(asked).schedule
    assert schedule.grid == time_grid(0, None, FLASH_T_GRID) and schedule.cfg == 0.0 and schedule.steps == 4
    assert any(field == "extra_params" and "num_inference_steps, guidance_scale" in note for field, _, note in asked.warnings)
    quiet = params(duration_seconds=1.0, instructions="Say hi.")
    adapter.stage_input(quiet)
    assert not any(field == "extra_params" for field, _, _ in quiet.warnings)


def test_base_defaults_and_overrides(tiny):
    adapter = AuKAdapter(tiny[0])
    default = adapter.stage_input(params(duration_seconds=1.0)).schedule
    assert default.steps == 32 and default.cfg == 2.0 and default.grid == time_grid(32, -1.0)
    explicit = adapter.stage_input(params(duration_seconds=1.0, extra_params={"t_grid": [0, 0.2, 1], "sway": 0.5})).schedule
    assert explicit.grid == time_grid(2, None, [0, 0.2, 1])


@pytest.mark.parametrize(("fields", "field"), [
    ({}, "duration_seconds"),
    ({"duration_seconds": float("inf")}, "duration_seconds"),
    ({"duration_seconds": 1.0, "extra_params": {"t_grid": [0.0]}}, "extra_params.t_grid"),
    ({"duration_seconds": 1.0, "extra_params": {"t_grid": [0.0, float("nan")]}}, "extra_params.t_grid"),
    ({"duration_seconds": 1.0, "extra_params": {"cfg": 1.0}}, "extra_params"),
    ({"duration_seconds": 1.0, "extra_params": {"vae_sample": 1}}, "extra_params.vae_sample"),
])
def test_bad_fields_name_themselves(tiny, fields, field):
    with pytest.raises(InvalidField) as error:
        AuKAdapter(tiny[0]).stage_input(params(**fields))
    assert error.value.field == field


def test_a_clip_longer_than_the_maximum_needs_a_duration(tiny):
    adapter = AuKAdapter(tiny[0])
    long_clip = ReferenceAudio(np.zeros(31 * 24000, dtype=np.float32), 24000)
    with pytest.raises(InvalidField) as error:
        adapter.stage_input(RequestParams(model="auk", voice="", fields={"instructions": "Clean it."}, reference=long_clip))
    assert error.value.field == "ref_audio"
    told = adapter.stage_input(RequestParams(model="auk", voice="", fields={"instructions": "Clean it.", "duration_seconds": 5.0},
                                             reference=long_clip))
    assert told.duration_seconds == 5.0


def test_instruction_precedence_and_task_shortcuts(tiny):
    adapter = AuKAdapter(tiny[0])
    clip = ReferenceAudio(np.zeros(24000, dtype=np.float32), 24000)
    edited = adapter.stage_input(RequestParams(model="auk", voice="", fields={"instructions": "Remove the noise."}, reference=clip))
    assert edited.instruction_for("whatever") == "Remove the noise." and edited.duration_seconds is None
    custom = adapter.stage_input(params(duration_seconds=1.0, task_type="custom_voice"))
    assert custom.instruction_for('He said "hi"') == 'Say the following: "He said \\"hi\\""'
    assert custom.instruction_for('Say the following: "x"') == 'Say the following: "x"'
    base = adapter.stage_input(params(duration_seconds=1.0, task_type="base"))
    assert base.instruction_for("Hello") == 'Say the following with the same voice: "Hello"'


def test_requests_share_prefill_and_flow_steps_and_match_their_solo_runs(tiny):
    """Three requests of different lengths, steps and guidance: one prefill, one flow step per step for all of them
    (4 steps for the longest schedule, not 2 + 3 + 4), and each latent as if it had run alone."""
    from vocalis.stages.models.auk.runtime import Conditioner, Flow
    from vocalis.stages.runtime.iterative import IterativeStage
    from vocalis.stages.runtime.request import SynthesisRequest
    from vocalis.stages.runtime.stage import StageItem

    config, encoder, dit, vae, prompts = tiny
    adapter = AuKAdapter(config)
    asks = [(0.1, 2, 2.0, 1), (0.2, 3, 0.0, 2), (0.06, 4, 1.5, 3)]

    def requests():
        out = []
        for seconds, steps, cfg, seed in asks:
            fields = {"duration_seconds": seconds, "seed": seed, "extra_params": {"num_inference_steps": steps, "guidance_scale": cfg}}
            out.append(SynthesisRequest(f"Say number {seed}.", adapter.stage_input(params(**fields)), output=None))
        return out

    def run(batch):
        # every ready request in every step (not sized by measured cost): sharing steps is what this test checks
        condition = IterativeStage("c", Conditioner(config, encoder, vae, prompts), adaptive_batching=False)
        flow = IterativeStage("f", Flow(dit), adaptive_batching=False)
        with torch.inference_mode():
            for request in batch:
                condition.add(StageItem(request))
            conditioned = condition.step()
            assert not condition.has_work()  # one prefill for the batch
            for item in conditioned:
                flow.add(item)
            latents = {}
            while flow.has_work():
                latents |= {id(item.request): item.payload for item in flow.step()}
        return [latents[id(r)] for r in batch], flow.steps

    together, steps = run(requests())
    assert steps == 4
    for request, latent in zip(requests(), together, strict=True):
        with traced() as path:  # the condition and the flow's steps of one request, chained
            (alone,), _ = run([request])
        # at the latents' magnitude: the flow is well-conditioned (test_auk_goldens.py's `flow_bound`)
        tolerance = rounding_bound(torch.float32, float(alone.abs().max()), path.steps)
        assert latent.shape == alone.shape and (latent - alone).abs().max().item() <= tolerance


def test_vae_sample_draws_the_source_latent_from_its_own_seeded_generator(tiny):
    from vocalis.stages.models.auk.runtime import Conditioner

    config, encoder, _, vae, prompts = tiny
    adapter = AuKAdapter(config)
    clip = ReferenceAudio((np.sin(np.arange(24000) / 24000 * 2 * np.pi * 150) * 0.3).astype(np.float32), 24000)
    stage = Conditioner(config, encoder, vae, prompts)

    def ref_latent(**extra) -> torch.Tensor:
        fields = {"instructions": "Clean it.", "seed": 4, **extra}
        stage_input = adapter.stage_input(RequestParams(model="auk", voice="", fields=fields, reference=clip))
        with torch.inference_mode():
            return stage.condition([stage_input], [""])[0].ref

    mean, drawn, again = ref_latent(), ref_latent(extra_params={"vae_sample": True}), ref_latent(extra_params={"vae_sample": True})
    assert mean.shape == (50, config.vae.latent_dim) and torch.equal(drawn, again) and not torch.equal(drawn, mean)
