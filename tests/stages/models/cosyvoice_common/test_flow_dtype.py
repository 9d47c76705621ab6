"""The flow stage's `dtype` of the CosyVoice line (CosyVoice3, GLM-TTS): its DiT runs in bfloat16 while the token
features, conditioning, Euler state and vocoder stay float32, and the mel it makes stays within bfloat16's rounding
of the float32 flow's, whole and (CosyVoice3) streamed through held keys and values.

Bound: each output frame is a chain of roundings to bfloat16 (eps 2^-7) through the DiT's blocks at each Euler step,
so its rms difference from float32's is held to `rounding_bound(bfloat16, rms of the float32 mel, blocks x steps)`.
A wrong path (a guidance row given the other's conditioning, a speaker left out) moves the mel by its own size.
"""

from __future__ import annotations

import pytest
import torch

from tests.stages.models.cosyvoice_common.flow_inputs import FAMILIES, STEPS, inputs
from tests.tolerance import rounding_bound
from vocalis.stages.components.flow_matching import FlowStream


def rms(x: torch.Tensor) -> float:
    return float(x.double().pow(2).mean().sqrt())


def both_flows(family: str, root) -> tuple:
    build, load = FAMILIES[family]
    path = build(root)
    return load(path).flow, load(path, flow_dtype=torch.bfloat16).flow


@pytest.fixture(scope="module", params=list(FAMILIES))
def flows(request, tmp_path_factory):
    return both_flows(request.param, tmp_path_factory.mktemp(request.param))


def test_only_the_dit_takes_the_stage_dtype(flows):
    full, half = flows
    assert {p.dtype for p in half.estimator.parameters()} == {torch.bfloat16}
    rest = [p for name, p in half.named_parameters() if not name.startswith(("estimator.", "decoder.estimator."))]
    assert rest == [] or {p.dtype for p in rest} == {torch.float32}
    assert {p.dtype for p in full.parameters()} == {torch.float32}


def test_a_bfloat16_dit_makes_the_float32_mel_within_its_rounding(flows):
    full, half = flows
    tokens, prompt_tokens, prompt_mel, embedding = inputs()
    with torch.inference_mode():
        expected = full.inference(tokens, prompt_tokens, prompt_mel, embedding, n_timesteps=STEPS)
        got = half.inference(tokens, prompt_tokens, prompt_mel, embedding, n_timesteps=STEPS)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    blocks = len(half.estimator.transformer_blocks)
    bound = rounding_bound(torch.bfloat16, rms(expected), blocks * STEPS)
    assert 0 < rms(got - expected) <= bound, (rms(got - expected), bound)


def test_a_streamed_bfloat16_flow_holds_its_frames_in_bfloat16_within_the_same_bound(tmp_path):
    full, half = both_flows("cosyvoice3", tmp_path)  # GLM-TTS re-decodes the prefix: it holds no frames
    tokens, prompt_tokens, prompt_mel, embedding = inputs(1)
    pieces = {}
    with torch.inference_mode():
        for name, flow in (("full", full), ("half", half)):
            stream = FlowStream(flow, prompt_tokens[0], prompt_mel[0], embedding[0], n_timesteps=STEPS)
            pieces[name] = [stream.advance(tokens[0, :n])[1] for n in (8, 16, 24)]
            if name == "half":
                assert {past.layer(0)[0].dtype for past in stream.pasts} == {torch.bfloat16}
    blocks = len(half.estimator.transformer_blocks)
    for expected, got in zip(pieces["full"], pieces["half"], strict=True):
        assert got.dtype == torch.float32 and got.shape == expected.shape
        assert rms(got - expected) <= rounding_bound(torch.bfloat16, rms(expected), blocks * STEPS)
