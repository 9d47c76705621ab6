"""Deploy settings reach the stage constructors, and a too-short chunk context is logged."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import torch

from vocalis.stages.runtime.autoregressive import AutoregressiveModel
from vocalis.stages.runtime.deploy import StageDeploy
from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage
from vocalis.stages.runtime.kv_cache import CacheShape


class ShapeOnly(AutoregressiveModel):
    """A stage model of which the stage reads only its declared members (cache shape and the defaults)."""

    emits_eos_frame = False
    cache_shape = CacheShape(num_layers=2, num_kv_heads=1, head_dim=4, max_len=64)


def test_autoregressive_stage_takes_name_bounds_dtype_and_device():
    model = ShapeOnly()
    deploy = StageDeploy(name="talker", max_num_seqs=3, max_num_batched_tokens=96, dtype="bfloat16", kv_block_size=8)
    stage = autoregressive_stage(model, deploy)
    assert stage.name == "talker"
    # no budget set: enough blocks for every sequence at max_len (3 x 64 positions in blocks of 8)
    assert stage.cache.k.shape == (2, 24, 8, 1, 4) and stage.cache.k.dtype == torch.bfloat16
    assert stage.scheduler.max_num_batched_tokens == 96
    budgeted = autoregressive_stage(model, StageDeploy(name="talker", max_num_seqs=3, dtype="bfloat16", kv_block_size=8, kv_cache_bytes=5 * 8 * 2 * 2 * 4 * 2))
    assert budgeted.cache.k.shape[1] == 5  # 5 blocks x 8 positions x (k, v) x 2 layers x 4 dims x 2 bytes


def test_chunk_stage_takes_its_policy_and_logs_a_short_context(caplog):
    decoder = SimpleNamespace(samples_per_frame=10, causal=True)
    deploy = StageDeploy(name="code2wav", max_num_seqs=5, chunk_frames=12, left_context_frames=4)
    with caplog.at_level(logging.INFO, logger="vocalis.stages.runtime.deployed_stages"):
        stage = chunk_stage(decoder, deploy, receptive_field_frames=4)
        assert not caplog.records
        chunk_stage(decoder, deploy, receptive_field_frames=9)
    assert stage.name == "code2wav" and stage.max_num_seqs == 5 and stage.policy.chunk_frames == 12
    assert "code2wav left context (4 frames) is shorter than the decoder's receptive field (9)" in caplog.text
