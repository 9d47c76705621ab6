"""The CosyVoice line's flow stage (CosyVoice3, GLM-TTS) declared to `quantize_stages` like AuK's: its DiT's linears
are packed for oneDNN by default (but the two its dtype is read from), the mel staying within float32's rounding of
the plain DiT's; `quantize: int8-dynamic` on the flow is applied and recorded instead of refused.

Bound: the packed product sums in another order than MKL's, so the two mels differ by rounding alone:
`rounding_bound(float32, peak, steps)` with the peak and the chained reduction lengths traced along the plain decode.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from tests import tiny_checkpoints as tiny
from tests.stages.models.cosyvoice_common.flow_inputs import FAMILIES, STEPS, inputs
from tests.tolerance import rounding_bound, traced
from vocalis.stages.layers.int8_linear import Int8DynamicLinear
from vocalis.stages.layers.packed_linear import PackedLinear
from vocalis.stages.models.quantizable import Quantizable, quantize_stages
from vocalis.stages.models.registry import load_model
from vocalis.stages.runtime.deploy import DeployConfig, StageDeploy


def linear_kinds(dit: nn.Module) -> set[type]:
    return {type(m) for m in dit.modules() if isinstance(m, nn.Linear | PackedLinear | Int8DynamicLinear)}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    build, load = FAMILIES[request.param]
    return build(tmp_path_factory.mktemp(request.param)), load


def test_the_flow_dit_is_packed_but_its_dtype_linears_and_its_mel_stays_within_float32s_rounding(family):
    path, load = family
    plain = load(path).flow
    packed = copy.deepcopy(plain)
    assert quantize_stages(DeployConfig([StageDeploy(name="flow")]), Quantizable.flow_dit("flow", packed.estimator)) == frozenset()
    dit = packed.estimator
    assert linear_kinds(dit) == {PackedLinear, nn.Linear}
    assert [m for m in dit.modules() if type(m) is nn.Linear] == [dit.time_embed.time_mlp[0], dit.proj_out]
    tokens, prompt_tokens, prompt_mel, embedding = inputs()
    with torch.inference_mode():
        with traced() as path_trace:
            expected = plain.inference(tokens, prompt_tokens, prompt_mel, embedding, n_timesteps=STEPS)
        got = packed.inference(tokens, prompt_tokens, prompt_mel, embedding, n_timesteps=STEPS)
    assert got.shape == expected.shape and got.dtype == torch.float32
    assert (got - expected).abs().max() <= rounding_bound(torch.float32, path_trace.peak, path_trace.steps)


@pytest.mark.parametrize("build", [tiny.cosyvoice3, tiny.glm_tts], ids=["cosyvoice3", "glm_tts"])
def test_int8_weights_on_the_flow_are_applied_and_recorded(tmp_path, build):
    model = load_model(str(build(tmp_path)), stage_overrides='{"flow": {"quantize": "int8-dynamic"}}')
    try:
        assert model.quantized == frozenset({"flow"})
        dit = model.pipeline.stages[-1].decoder.flow.estimator
        assert linear_kinds(dit) == {Int8DynamicLinear, nn.Linear}
    finally:
        model.close()
