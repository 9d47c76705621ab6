"""Deploy configs: family defaults, a YAML merged over them, CLI overrides merged last."""

from __future__ import annotations

import pytest

from vocalis.stages.models.piper.loader import DEPLOY_DEFAULTS as PIPER_DEFAULTS
from vocalis.stages.runtime.deploy import load_deploy

DEFAULTS = """
stages:
  - name: talker
    max_num_seqs: 8
  - name: code2wav
    chunk_frames: 25
"""


@pytest.fixture
def defaults(tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text(DEFAULTS)
    return path


def test_defaults_file_and_overrides(defaults, tmp_path):
    custom = tmp_path / "custom.yaml"
    custom.write_text("stages:\n  - name: code2wav\n    left_context_frames: 10\n    chunk_growth: 2\n")
    config = load_deploy(defaults, custom, '{"0": {"max_num_seqs": 4}, "code2wav": {"first_chunk_frames": 3}}')
    talker, code2wav = config.stages
    assert talker.max_num_seqs == 4 and code2wav.chunk_frames == 25 and code2wav.left_context_frames == 10
    policy = code2wav.chunk_policy()
    assert (policy.first_chunk_frames, policy.growth) == (3, 2.0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ('{"0": {"max_num_seq": 4}}', "unknown stage settings"),
        ('{"5": {"max_num_seqs": 4}}', "no stage 5"),
        ('{"vocoder": {"max_num_seqs": 4}}', "no stage named"),
        ('{"0": {"max_num_seqs": "many"}}', "must be int"),
        ('[1]', "JSON object"),
        ('{"0": {"quantize": "int4"}}', r"talker.quantize must be one of \['none', 'int8-dynamic', 'int4-weight', 'int4-decode'\], got 'int4'"),
        ('{"0": {"quantize": "int8-dynamic", "device": "cuda"}}', "runs on a CPU only"),
        ('{"0": {"packed_linears": "no"}}', "talker.packed_linears must be true or false, got 'no'"),
        ('{"0": {"packed_linears": 0}}', "must be true or false"),
    ],
)
def test_bad_overrides_are_clear(defaults, overrides, message):
    with pytest.raises(ValueError, match=message):
        load_deploy(defaults, None, overrides)


def test_packed_linears_is_on_unless_turned_off(defaults):
    assert load_deploy(defaults, None, None).stages[0].packed_linears is True
    assert load_deploy(defaults, None, '{"0": {"packed_linears": false}}').stages[0].packed_linears is False


def test_piper_defaults_load():
    (piper,) = load_deploy(PIPER_DEFAULTS).stages
    assert piper.name == "piper" and piper.max_num_seqs >= 1
