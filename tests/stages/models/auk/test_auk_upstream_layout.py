"""The upstream layout: tencent/AuK's directory (config.yaml, auk_base/auk_flash.safetensors, vae.safetensors) with
the Qwen2.5-Omni-3B snapshot named by a flag, served without assembling anything on disk; the same model as the
assembled bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from vocalis.stages.api import family as families
from vocalis.stages.models.auk.loader import load_modules
from vocalis.stages.models.registry import load_model

TINY = Path("tests/goldens/auk/tiny").resolve()


@pytest.fixture
def upstream(tmp_path) -> tuple[Path, Path]:
    bundle = json.loads((TINY / "config.json").read_text())
    auk, qwen = tmp_path / "AuK", tmp_path / "Qwen2.5-Omni-3B"
    auk.mkdir()
    qwen.mkdir()
    arch = {**bundle["dit"], "latent_dim": "${model.vae.latent_dim}"}
    (auk / "config.yaml").write_text(yaml.safe_dump({"model": {
        "name": "AuK", "arch": arch, "vae": bundle["vae"], "schedule": {"nfe": 32, "cfg": 2.0, "sway": -1.0},
        "text_encoder": {"text_encoder_path": "Qwen/Qwen2.5-Omni-3B"}}}))
    (auk / "auk_base.safetensors").symlink_to(TINY / "auk_base.safetensors")
    (auk / "vae.safetensors").symlink_to(TINY / "vae.safetensors")
    (qwen / "config.json").write_text(json.dumps({"model_type": "qwen2_5_omni", "thinker_config": bundle["thinker_config"]}))
    for name in ("model.safetensors", "tokenizer.json"):
        (qwen / name).symlink_to(TINY / name)
    return auk, qwen


def test_the_two_directories_load_the_same_model_as_the_bundle(upstream, tiny):
    auk, qwen = upstream
    config, encoder, dit, vae, prompts = load_modules(auk, qwen_dir=qwen)
    bundle_config, bundle_encoder, bundle_dit, bundle_vae, _ = tiny
    assert config == bundle_config
    for ours, theirs in ((encoder, bundle_encoder), (dit, bundle_dit), (vae, bundle_vae)):
        mine, other = ours.state_dict(), theirs.state_dict()
        assert mine.keys() == other.keys() and all(torch.equal(mine[k], other[k]) for k in mine)
    assert prompts.ids("Say hi.", None) == tiny[4].ids("Say hi.", None)


def test_serve_finds_the_family_and_needs_the_flag(upstream):
    auk, qwen = upstream
    families.discover()
    assert families.family_for_checkpoint(auk).name == "auk"
    with pytest.raises(ValueError, match="weights_dir"):
        load_model(str(auk))
    model = load_model(str(auk), stage_overrides=json.dumps({"condition": {"weights_dir": str(qwen)}}))
    try:
        assert model.family == "auk" and model.capabilities.sample_rate == 24000 and model.name == "AuK"
    finally:
        model.close()
