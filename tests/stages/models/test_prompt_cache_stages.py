"""A deploy's `prompt_cache_bytes` is read or refused, the same way in every family.

A stage that keeps recent voices' prompt work (`ModelFamily.prompt_cache_stages`: CosyVoice3's flow) loads with a
budget; on every other stage of every family the setting is refused by name before anything loads, rather than
ignored while the operator believes voices are being kept.
"""

from __future__ import annotations

import pytest

from tests.family_cases import CASES, case_family, load


@pytest.mark.parametrize("name", list(CASES))
def test_a_prompt_cache_on_a_stage_without_one_is_refused_by_name(name, tmp_path):
    path, fam, stages = case_family(name, tmp_path)
    assert set(fam.prompt_cache_stages) <= set(stages), f"{name} declares prompt caches on stages it does not have"
    for stage in stages:
        if stage in fam.prompt_cache_stages:
            continue
        with pytest.raises(ValueError, match=rf"{fam.name} family has no prompt cache on stage\(s\) \['{stage}'\]"):
            load(name, path, {stage: {"prompt_cache_bytes": 1 << 20}})


def test_cosyvoice3s_flow_keeps_primed_voices_within_the_deploy_budget(tmp_path):
    path, fam, _ = case_family("cosyvoice3", tmp_path)
    assert fam.prompt_cache_stages == ("flow",)
    model = load("cosyvoice3", path, {"flow": {"prompt_cache_bytes": 12345}})
    try:
        [flow] = [stage for stage in model.pipeline.stages if stage.name == "flow"]
        assert flow.decoder.primed.budget_bytes == 12345
    finally:
        model.close()
