"""Every stage's deploy `dtype` is either honoured or refused, the same way in every family.

A stage a family declares float32-only (`ModelFamily.float32_stages`: a codec that also encodes reference clips, an
ONNX voice) refuses another dtype by name before anything loads. Every other stage, set alone to bfloat16, holds
bfloat16 tensors once loaded, where the family's float32 defaults hold none: a loader that drops a stage's dtype
(serving it in float32 while the deploy says otherwise) fails here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

from tests.family_cases import CASES, case_family, load
from vocalis.stages.models.registry import load_model


def tensors_reachable(root: object) -> Iterator[torch.Tensor]:
    """The tensors a stage holds: its modules' parameters and buffers, and tensors held by the Vocalis objects and
    containers under it (KV caches, tables)."""
    seen: set[int] = set()
    unvisited = [root]
    while unvisited:
        obj = unvisited.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            yield obj
        elif isinstance(obj, nn.Module):
            yield from obj.parameters()
            yield from obj.buffers()
            unvisited.extend(v for k, v in vars(obj).items() if not k.startswith("_"))
        elif isinstance(obj, dict):
            unvisited.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            unvisited.extend(obj)
        elif type(obj).__module__.startswith("vocalis.") and hasattr(obj, "__dict__"):
            unvisited.extend(vars(obj).values())


def stage_holds(model, stage: str, dtype: torch.dtype) -> bool:
    [found] = [s for s in model.pipeline.stages if s.name == stage]
    return any(t.dtype == dtype for t in tensors_reachable(found))


@pytest.mark.parametrize("name", list(CASES))
def test_each_stage_takes_bfloat16_or_refuses_it_by_name(name, tmp_path):
    path, fam, stages = case_family(name, tmp_path)
    assert set(fam.float32_stages) <= set(stages), f"{name} declares float32-only stages it does not have"
    for stage in fam.float32_stages:
        with pytest.raises(ValueError, match=rf"{fam.name} family runs stage\(s\) \['{stage}'\] in float32 only \(dtype \['bfloat16'\]\)"):
            load(name, path, {stage: {"dtype": "bfloat16"}})
    honoured = [stage for stage in stages if stage not in fam.float32_stages]
    model = load(name, path)
    try:
        assert not any(stage_holds(model, stage, torch.bfloat16) for stage in honoured), "float32 defaults hold bfloat16"
    finally:
        model.close()
    for stage in honoured:
        model = load(name, path, {stage: {"dtype": "bfloat16"}})
        try:
            assert stage_holds(model, stage, torch.bfloat16), f"{name}: stage {stage!r} ignored its dtype bfloat16"
        finally:
            model.close()


def test_piper_refuses_a_half_precision_voice_before_loading():
    with pytest.raises(ValueError, match=r"piper family runs stage\(s\) \['piper'\] in float32 only"):
        load_model(None, stage_overrides='{"piper": {"dtype": "float16"}}')
