"""Component parity on the tiny checkpoint (make_goldens.py says how the goldens were made).

Oracles: the thinker (text decoder, audio tower, Whisper features) is transformers' Qwen2.5-Omni thinker, the layer
fusion applied on top in the golden script; the DiT, flow solver and VAE are sglang-omni 0.1.9's plain-torch port of
AuK, an independent port: agreement with it is agreement between two ports, not with Tencent's code, which is not
installable. The noise is recorded: the golden's draws and ours come from the same seeded generators.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.auk.config import FLASH_T_GRID
from vocalis.stages.models.auk.encoder import audio_token_count
from vocalis.stages.models.auk.runtime import FlowJob, flow_step, initial_noise
from vocalis.stages.models.auk.schedule import time_grid

HERE = Path("tests/goldens/auk")
ENCODER = load_file(str(HERE / "goldens_encoder.safetensors"))
FLOW = load_file(str(HERE / "goldens_flow.safetensors"))
INSTRUCTION = 'Say the following with a warm voice: "Hello there."'


FLOW_ATOL = 5e-4
"""The solved latents (|x| up to 15 after the ODE's steps) against the port's: 1.75e-4 on an AVX-512 Xeon, under 1e-4
where the goldens were made (float32 rounding accumulated over the steps)."""


def close(ours: torch.Tensor, golden: torch.Tensor, atol: float) -> None:
    assert ours.shape == golden.shape
    assert (ours.float() - golden.float()).abs().max().item() <= atol


def test_prompt_ids_are_the_chatml_layout(tiny):
    _, _, _, _, prompts = tiny
    mel = ENCODER["mel"]
    assert prompts.ids(INSTRUCTION, None) == ENCODER["ids_text"].tolist()
    assert prompts.ids(INSTRUCTION, audio_token_count(mel.shape[1])) == ENCODER["ids_audio"].tolist()


def test_whisper_features_match_the_feature_extractor():
    close(whisper_log_mel(ENCODER["clip16k"], 128, zero_padded=True), ENCODER["mel"], 1e-4)


def test_fused_condition_matches_the_thinker_text_only_and_with_a_clip_batched_or_alone(tiny):
    config, encoder, _, _, _ = tiny
    ids_text, ids_audio = ENCODER["ids_text"], ENCODER["ids_audio"]
    features = whisper_log_mel(ENCODER["clip16k"], 128, zero_padded=True)
    with torch.inference_mode():
        alone_text = encoder([ids_text], [None], config.audio_token_id)[0]
        alone_audio = encoder([ids_audio], [features], config.audio_token_id)[0]
        both = encoder([ids_audio, ids_text], [features, None], config.audio_token_id)
    close(alone_text, ENCODER["cond_text"], 1e-4)
    close(alone_audio, ENCODER["cond_audio"], 1e-4)
    close(both[0], alone_audio, 1e-5)
    close(both[1], alone_text, 1e-5)


def _job(dit, text, ref, frames, seed, grid, cfg) -> FlowJob:
    return FlowJob(None, dit.project_text(text[None])[0], ref, grid, cfg, initial_noise(frames, dit.latent_dim, seed))


def _run(dit, jobs: list[FlowJob]) -> list[torch.Tensor]:
    with torch.inference_mode():
        while not all(job.done for job in jobs):
            flow_step(dit, [job for job in jobs if not job.done])
    return [job.x for job in jobs]


def test_recorded_noise_and_time_grid():
    assert torch.equal(initial_noise(12, 8, 5), FLOW["noise_a"])
    close(torch.tensor(time_grid(32, -1.0)), FLOW["grid_sway"], 0)


def test_flow_matches_the_port_guided_unguided_and_on_an_explicit_grid(tiny):
    _, _, dit, _, _ = tiny
    none = torch.zeros(0, 8)
    with torch.inference_mode():
        (guided,) = _run(dit, [_job(dit, FLOW["text_a"], FLOW["ref_a"], 12, 5, time_grid(3, -1.0), 2.0)])
        (flash,) = _run(dit, [_job(dit, FLOW["text_b"], none, 5, 6, time_grid(0, None, FLASH_T_GRID), 0.0)])
        (explicit,) = _run(dit, [_job(dit, FLOW["text_a"], FLOW["ref_a"], 12, 5, time_grid(2, None, [0.0, 0.3, 1.0]), 1.5)])
    close(guided, FLOW["guided_a"], FLOW_ATOL)
    close(flash, FLOW["unguided_b"], FLOW_ATOL)
    close(explicit, FLOW["tgrid_a"], FLOW_ATOL)


def test_a_batch_of_two_lengths_matches_the_port_and_each_alone(tiny):
    _, _, dit, _, _ = tiny
    grid = time_grid(3, -1.0)
    with torch.inference_mode():
        a, b = _run(dit, [_job(dit, FLOW["text_a"], FLOW["ref_a"], 12, 5, grid, 2.0), _job(dit, FLOW["text_b"], torch.zeros(0, 8), 5, 6, grid, 2.0)])
        (b_alone,) = _run(dit, [_job(dit, FLOW["text_b"], torch.zeros(0, 8), 5, 6, grid, 2.0)])
    close(a, FLOW["batch_a"], FLOW_ATOL)
    close(b, FLOW["batch_b"], FLOW_ATOL)
    close(a, FLOW["guided_a"], FLOW_ATOL)  # batch invariance
    close(b, b_alone, 1e-4)


def test_vae_decode_and_posterior_draw_match_the_port(tiny):
    _, _, _, vae, _ = tiny
    with torch.inference_mode():
        decoded = vae.decode(FLOW["latent"][None])[0]
        drawn = vae.encode(FLOW["wave"], torch.Generator().manual_seed(9))
    close(decoded, FLOW["decoded"], 1e-4)
    close(drawn, FLOW["encoded_sample_seed9"], 1e-4)
