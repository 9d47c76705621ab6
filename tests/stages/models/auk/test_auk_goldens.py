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

from tests.tolerance import Trace, log_power_bound, rounding_bound, traced
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.auk.config import FLASH_T_GRID
from vocalis.stages.models.auk.encoder import audio_token_count
from vocalis.stages.models.auk.runtime import FlowJob, flow_step, initial_noise
from vocalis.stages.models.auk.schedule import time_grid

HERE = Path("tests/goldens/auk")
ENCODER = load_file(str(HERE / "goldens_encoder.safetensors"))
FLOW = load_file(str(HERE / "goldens_flow.safetensors"))
INSTRUCTION = 'Say the following with a warm voice: "Hello there."'


def flow_bound(path: Trace, x: torch.Tensor) -> float:
    """The solved latents x (|x| up to 15 after the ODE's steps) against the port's: float32 rounding accumulated
    over the steps (the DiT's every layer, every step chained), at the latents' magnitude, not the path's peak (760,
    inside the MLPs, which the adaLN gates scale down): the solve is well-conditioned, a float32 one is 4.6e-5 off a
    float64 one, a fifteenth of this bound. 1.75e-4 measured on an AVX-512 Xeon, under 1e-4 where the goldens were
    made."""
    return rounding_bound(torch.float32, float(x.abs().max()), path.steps)


def close(ours: torch.Tensor, golden: torch.Tensor, atol: float | torch.Tensor) -> None:
    assert ours.shape == golden.shape
    assert ((ours.float() - golden.float()).abs() <= atol).all()


def test_prompt_ids_are_the_chatml_layout(tiny):
    _, _, _, _, prompts = tiny
    mel = ENCODER["mel"]
    assert prompts.ids(INSTRUCTION, None) == ENCODER["ids_text"].tolist()
    assert prompts.ids(INSTRUCTION, audio_token_count(mel.shape[1])) == ENCODER["ids_audio"].tolist()


def test_whisper_features_match_the_feature_extractor():
    golden = ENCODER["mel"]  # (log10 of the mel power + 4) / 4, the power from a 400-point FFT through 201-bin filters
    tolerance = log_power_bound(10 ** (4 * golden.double() - 4), 0, 400 + 201) / (4 * torch.tensor(10.0).log())
    close(whisper_log_mel(ENCODER["clip16k"], 128, zero_padded=True), golden, tolerance)


def test_fused_condition_matches_the_thinker_text_only_and_with_a_clip_batched_or_alone(tiny):
    config, encoder, _, _, _ = tiny
    ids_text, ids_audio = ENCODER["ids_text"], ENCODER["ids_audio"]
    features = whisper_log_mel(ENCODER["clip16k"], 128, zero_padded=True)
    with torch.inference_mode():
        alone_text = encoder([ids_text], [None], config.audio_token_id)[0]
        with traced() as path:  # the longer path: the audio tower, then the text decoder
            alone_audio = encoder([ids_audio], [features], config.audio_token_id)[0]
        both = encoder([ids_audio, ids_text], [features, None], config.audio_token_id)
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)
    close(alone_text, ENCODER["cond_text"], tolerance)
    close(alone_audio, ENCODER["cond_audio"], tolerance)
    close(both[0], alone_audio, tolerance)
    close(both[1], alone_text, tolerance)


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
        with traced() as guiding:
            (guided,) = _run(dit, [_job(dit, FLOW["text_a"], FLOW["ref_a"], 12, 5, time_grid(3, -1.0), 2.0)])
        with traced() as flashing:
            (flash,) = _run(dit, [_job(dit, FLOW["text_b"], none, 5, 6, time_grid(0, None, FLASH_T_GRID), 0.0)])
        with traced() as gridding:
            (explicit,) = _run(dit, [_job(dit, FLOW["text_a"], FLOW["ref_a"], 12, 5, time_grid(2, None, [0.0, 0.3, 1.0]), 1.5)])
    close(guided, FLOW["guided_a"], flow_bound(guiding, guided))
    close(flash, FLOW["unguided_b"], flow_bound(flashing, flash))
    close(explicit, FLOW["tgrid_a"], flow_bound(gridding, explicit))


def test_a_batch_of_two_lengths_matches_the_port_and_each_alone(tiny):
    _, _, dit, _, _ = tiny
    grid = time_grid(3, -1.0)
    with torch.inference_mode():
        with traced() as path:
            a, b = _run(dit, [_job(dit, FLOW["text_a"], FLOW["ref_a"], 12, 5, grid, 2.0), _job(dit, FLOW["text_b"], torch.zeros(0, 8), 5, 6, grid, 2.0)])
        (b_alone,) = _run(dit, [_job(dit, FLOW["text_b"], torch.zeros(0, 8), 5, 6, grid, 2.0)])
    close(a, FLOW["batch_a"], flow_bound(path, a))
    close(b, FLOW["batch_b"], flow_bound(path, b))
    close(a, FLOW["guided_a"], flow_bound(path, a))  # batch invariance
    close(b, b_alone, flow_bound(path, b))


def test_vae_decode_and_posterior_draw_match_the_port(tiny):
    _, _, _, vae, _ = tiny
    with torch.inference_mode():
        with traced() as decoding:
            decoded = vae.decode(FLOW["latent"][None])[0]
        with traced() as encoding:
            drawn = vae.encode(FLOW["wave"], torch.Generator().manual_seed(9))
    close(decoded, FLOW["decoded"], rounding_bound(torch.float32, decoding.peak, decoding.steps))
    close(drawn, FLOW["encoded_sample_seed9"], rounding_bound(torch.float32, encoding.peak, encoding.steps))
