"""The `quantize` and `packed_linears` deploy settings, applied once from the family's declaration
(stages/models/quantizable.py), the first recorded on the loaded model: a declared stage asked for int8 or int4 is
quantised (its kept linears left float), a declared stage not asked is left in float, its linears packed for oneDNN
unless `packed_linears` is off (kept ones never), and `load_model` refuses a stage asked that the family does not
declare, naming it, from the record that the loaded model carries."""

from __future__ import annotations

import pytest
from torch import nn

from vocalis.stages.layers.int4_decode_linear import Int4DecodeLinear
from vocalis.stages.layers.int4_linear import Int4WeightLinear
from vocalis.stages.layers.int8_linear import Int8DynamicLinear
from vocalis.stages.layers.packed_linear import PackedLinear
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.stages.models.quantizable import Quantizable, quantize_stages
from vocalis.stages.models.registry import load_model
from vocalis.stages.runtime.deploy import DeployConfig, StageDeploy

TEMPLATE = "vocalis.stages.models._template.family"


def deploy(talker: str = "none", code2wav: str = "none", packed: bool = True) -> DeployConfig:
    return DeployConfig([StageDeploy(name="talker", quantize=talker, packed_linears=packed),
                         StageDeploy(name="code2wav", quantize=code2wav, packed_linears=packed)])


def linear_types(module: nn.Module) -> list[type]:
    return [type(m) for m in module.modules() if isinstance(m, nn.Linear | Int8DynamicLinear | Int4WeightLinear | PackedLinear)]


@pytest.mark.parametrize(("choice", "kind"), [("int8-dynamic", Int8DynamicLinear), ("int4-weight", Int4WeightLinear),
                                              ("int4-decode", Int4DecodeLinear)])
def test_a_declared_stage_asked_to_quantise_is_quantised_and_recorded_and_one_not_asked_is_left(choice, kind):
    talker, head = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32)), nn.Linear(32, 16)
    codec = nn.Sequential(nn.Linear(32, 32))
    talker.append(head)
    quantized = quantize_stages(deploy(talker=choice), Quantizable("talker", (talker,), keep=(head,)),
                                Quantizable("code2wav", (codec,)))
    assert quantized == frozenset({"talker"})
    assert [type(m) for m in talker] == [kind, kind, nn.Linear] and talker[2] is head
    assert linear_types(codec) == [PackedLinear]
    assert quantize_stages(deploy(talker="int8-dynamic")) == frozenset()  # nothing declared: nothing quantised


def test_packed_linears_takes_what_the_quantisation_leaves_in_float_but_kept_linears_and_can_be_turned_off():
    talker, head = nn.Sequential(nn.Linear(64, 64), nn.Linear(48, 64)), nn.Linear(64, 16)  # int4 takes no input of 48
    talker.append(head)
    assert quantize_stages(deploy(talker="int4-weight"), Quantizable("talker", (talker,), keep=(head,))) == {"talker"}
    assert [type(m) for m in talker] == [Int4WeightLinear, PackedLinear, nn.Linear] and talker[2] is head
    codec = nn.Sequential(nn.Linear(32, 32))
    assert quantize_stages(deploy(packed=False), Quantizable("code2wav", (codec,))) == frozenset()
    assert linear_types(codec) == [nn.Linear]


def test_a_declared_stage_without_a_linear_the_kernel_takes_is_refused_by_name():
    with pytest.raises(ValueError, match="'code2wav': quantize int8-dynamic found no linear"):
        quantize_stages(deploy(code2wav="int8-dynamic"), Quantizable("code2wav", (nn.Conv1d(2, 2, 3),)))
    with pytest.raises(ValueError, match="'code2wav': quantize int4-weight found no linear"):
        quantize_stages(deploy(code2wav="int4-weight"), Quantizable("code2wav", (nn.Linear(8, 8),)))


def test_the_loaded_model_records_what_its_loader_quantised(tmp_path):
    checkpoint = build_checkpoint(tmp_path / "tiny-tts")
    model = load_model(str(checkpoint), stage_overrides='{"talker": {"quantize": "int8-dynamic"}}', family_modules=(TEMPLATE,))
    try:
        assert model.quantized == frozenset({"talker"})
        talker = model.pipeline.stages[0].model.talker
        assert linear_types(talker) and set(linear_types(talker)) == {Int8DynamicLinear}
    finally:
        model.close()
    model = load_model(str(checkpoint), family_modules=(TEMPLATE,))
    try:
        assert model.quantized == frozenset()
    finally:
        model.close()


def test_a_stage_the_family_does_not_declare_is_refused_by_name_with_what_was_quantised(tmp_path):
    checkpoint = build_checkpoint(tmp_path / "tiny-tts")
    overrides = '{"talker": {"quantize": "int8-dynamic"}, "code2wav": {"quantize": "int8-dynamic"}}'
    with pytest.raises(ValueError, match=r"tiny_tts family cannot quantise stage\(s\) \['code2wav'\] .*quantised: \['talker'\]"):
        load_model(str(checkpoint), stage_overrides=overrides, family_modules=(TEMPLATE,))


def test_every_quantize_choice_but_none_has_a_kernel():
    from vocalis.stages.models.quantizable import KERNELS
    from vocalis.stages.runtime.weight_quantization import QUANTIZE_CHOICES

    assert set(KERNELS) == set(QUANTIZE_CHOICES) - {"none"}
