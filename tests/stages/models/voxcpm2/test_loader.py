"""Loading VoxCPM2 checkpoints: the real checkpoint's tensor names and shapes, weight norm, strictness, the family."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.goldens.voxcpm2.cases import HERE
from vocalis.stages.api import family as families
from vocalis.stages.models.registry import load_model
from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.loader import DEPLOY_DEFAULTS
from vocalis.stages.models.voxcpm2.modules import VoxCPM2
from vocalis.stages.models.voxcpm2.vae import AudioVAE, receptive_field_frames
from vocalis.stages.models.voxcpm2.weights import fold_weight_norm, load_modules
from vocalis.stages.runtime.deploy import load_deploy


def real_config() -> VoxCPM2Config:
    """The config.json published with openbmb/VoxCPM2."""
    return VoxCPM2Config.from_dict(json.loads((HERE / "real_config.json").read_text()))


def test_real_checkpoint_names_and_shapes():
    """Our modules for the published config expect exactly the tensors of openbmb/VoxCPM2 (577 in model.safetensors;
    audiovae.safetensors with weight_g/weight_v pairs), as the reference package builds them (real_keys.json)."""
    expected = json.loads((HERE / "real_keys.json").read_text())
    config = real_config()
    with torch.device("meta"):
        model, vae = VoxCPM2(config), AudioVAE(config.audio_vae)
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    assert len(expected["model"]) == 577
    assert ours == expected["model"]
    folded = {}
    for key, shape in expected["audiovae"].items():
        if key.endswith(".weight_g"):
            continue
        folded[key.removesuffix("_v") if key.endswith(".weight_v") else key] = shape
    assert {k: list(v.shape) for k, v in vae.state_dict().items()} == folded


def test_real_config_resolves_like_the_reference():
    config = real_config()
    assert (config.base_lm.num_layers, config.base_lm.head_dim, config.base_lm.num_kv_heads) == (28, 128, 2)
    assert config.residual_lm.no_rope and config.residual_lm.num_layers == 8 and config.residual_lm.vocab_size == 0
    assert (config.local_dit.hidden_size, config.local_dit.num_heads, config.local_dit.num_kv_heads) == (1024, 16, 2)
    assert not config.base_lm.use_mup and config.base_lm.embedding_scale == 1.0
    assert config.samples_per_patch == 7680 and config.audio_vae.out_sample_rate == 48000


def test_deploy_left_context_covers_the_decoder_receptive_field():
    config = real_config()
    vae = load_deploy(DEPLOY_DEFAULTS).stage("audio_vae")
    assert vae.left_context_frames >= math.ceil(receptive_field_frames(config.audio_vae) / config.patch_size)


def test_both_weight_norm_spellings_load_the_same(tmp_path):
    source = HERE / "tiny"
    target = tmp_path / "parametrized"
    shutil.copytree(source, target)
    renamed = {}
    for key, value in load_file(str(source / "audiovae.safetensors")).items():
        key = key.replace(".weight_g", ".parametrizations.weight.original0").replace(".weight_v", ".parametrizations.weight.original1")
        renamed[key] = value
    save_file(renamed, str(target / "audiovae.safetensors"))
    a, b = load_modules(source).vae, load_modules(target).vae
    z = torch.randn(1, 8, 6, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        assert torch.equal(a.decode(z), b.decode(z))


@pytest.mark.filterwarnings("ignore:.*weight_norm.*:FutureWarning")
def test_weight_norm_folding_matches_torch():
    conv = torch.nn.utils.weight_norm(torch.nn.ConvTranspose1d(4, 3, 6, stride=3))
    with torch.no_grad():
        conv.weight_g.uniform_(0.5, 2.0)
    state = {f"c.{k}": v for k, v in conv.state_dict().items()}
    folded = fold_weight_norm(state)
    conv(torch.zeros(1, 4, 2))  # recompute weight from g, v
    assert set(folded) == {"c.weight", "c.bias"}
    torch.testing.assert_close(folded["c.weight"], conv.weight.detach())


def test_loading_is_strict(tmp_path):
    target = tmp_path / "broken"
    shutil.copytree(HERE / "tiny", target)
    weights = load_file(str(target / "model.safetensors"))
    weights.pop("stop_head.weight")
    weights["extra.weight"] = torch.zeros(1)
    save_file(weights, str(target / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing \['stop_head.weight'\].*unexpected \['extra.weight'\]"):
        load_modules(target)


def test_served_from_its_checkpoint_directory(tmp_path):
    """config.json names only `architecture: voxcpm2`; the built-in family loads it with two stages at 48 kHz."""
    assert "model_type" not in json.loads((HERE / "tiny" / "config.json").read_text())
    checkpoint = tmp_path / "voxcpm2-tiny"
    shutil.copytree(HERE / "tiny", checkpoint)
    loaded = load_model(str(checkpoint))
    try:
        assert families.family_for_checkpoint(checkpoint).name == "voxcpm2"
        assert loaded.family == "voxcpm2" and loaded.name == "voxcpm2-tiny"
        assert [stage.name for stage in loaded.pipeline.stages] == ["latent_generator", "audio_vae"]
        assert loaded.capabilities.sample_rate == 48000
    finally:
        loaded.close()
