"""Half precision without native instructions is named (warned at load), with them or on an unknown CPU it is not."""

from __future__ import annotations

import logging

from vocalis.stages.models import registry
from vocalis.stages.runtime.cpu_features import lacks_native
from vocalis.stages.runtime.deploy import DeployConfig, StageDeploy


def test_native_flags_per_dtype():
    assert lacks_native("bfloat16", frozenset({"avx512f", "avx512_vnni"}))
    assert not lacks_native("bfloat16", frozenset({"avx512_bf16"})) and not lacks_native("bfloat16", frozenset({"amx_bf16"}))
    assert not lacks_native("bfloat16", frozenset({"bf16", "asimd"}))  # Arm
    assert lacks_native("float16", frozenset({"avx512_bf16"})) and not lacks_native("float16", frozenset({"avx512_fp16"}))
    assert not lacks_native("float32", frozenset())


def test_a_stage_in_emulated_half_precision_is_warned_by_name(monkeypatch, caplog):
    monkeypatch.setattr(registry, "lacks_native", lambda dtype: dtype == "bfloat16")
    deploy = DeployConfig((StageDeploy(name="talker", dtype="bfloat16"), StageDeploy(name="code2wav"),
                           StageDeploy(name="gpu_stage", dtype="bfloat16", device="cuda")))
    with caplog.at_level(logging.WARNING):
        registry._warn_emulated_half("qwen3_tts", deploy)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "stage 'talker' runs in bfloat16 on a CPU without native bfloat16" in warned[0]
