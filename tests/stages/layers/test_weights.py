"""stages/layers/weights.py: both weight-norm spellings fold like torch's own weight norm; loading is strict and names keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn.utils import parametrizations, weight_norm

from vocalis.stages.layers.weights import fold_weight_norm, load_strict, read_weights, take


def test_both_weight_norm_spellings_fold_to_the_effective_weight():
    torch.manual_seed(0)
    old = weight_norm(nn.Conv1d(3, 4, 5))
    new = parametrizations.weight_norm(nn.Conv1d(3, 4, 5))
    positional = parametrizations.weight_norm(nn.Conv1d(4, 4, 3, groups=2), dim=2)  # HuBERT's norm over dim 2
    for module in (old, new, positional):
        state = {f"conv.{k}": v for k, v in module.state_dict().items()}
        folded = fold_weight_norm(state)
        assert set(folded) == {"conv.weight", "conv.bias"}
        assert torch.equal(folded["conv.weight"], module.weight.detach())  # exactly what torch computes at run time


def test_take_strips_the_prefix():
    weights = {"talker.a.weight": torch.ones(1), "talker.b": torch.zeros(1), "codec.a": torch.ones(2)}
    assert set(take(weights, "talker.")) == {"a.weight", "b"}


def test_load_strict_names_missing_unexpected_and_misshapen_keys():
    module = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    good = {k: torch.randn_like(v) for k, v in module.state_dict().items()}
    load_strict(module, good, "ckpt")
    assert torch.equal(module[0].weight, good["0.weight"])
    with pytest.raises(ValueError, match=r"ckpt: .*missing \['1.bias'\], unexpected \['2.weight'\]"):
        load_strict(module, {k: v for k, v in good.items() if k != "1.bias"} | {"2.weight": torch.ones(1)}, "ckpt")
    with pytest.raises(ValueError, match=r"0.weight has shape \(2, 2\)"):
        load_strict(module, good | {"0.weight": torch.ones(2, 2)}, "ckpt")


def test_load_strict_accepts_only_declared_unused_keys():
    module = nn.Linear(2, 2)
    weights = {k: v.clone() for k, v in module.state_dict().items()} | {"ema.cluster_size": torch.ones(3)}
    load_strict(module, weights, "ckpt", unused=[r"ema\..*"])
    with pytest.raises(ValueError, match=r"unexpected \['ema.cluster_size'\]"):
        load_strict(module, weights, "ckpt", unused=[r"ema"])  # a full match is needed


def test_read_weights_reads_safetensors_and_torch_state_dicts(tmp_path: Path):
    tensors = {"a": torch.arange(3.0), "b": torch.ones(2, 2)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    torch.save(tensors, tmp_path / "model.pt")
    for path in (tmp_path / "model.safetensors", tmp_path, tmp_path / "model.pt"):
        read = read_weights(path)
        assert set(read) == {"a", "b"} and torch.equal(read["a"], tensors["a"])


def test_read_weights_refuses_pickled_objects(tmp_path: Path):
    torch.save({"a": torch.ones(1), "code": Path("/etc")}, tmp_path / "evil.pt")
    with pytest.raises(Exception, match="[Ww]eights only load failed|Unsupported global"):
        read_weights(tmp_path / "evil.pt")
    with pytest.raises(ValueError, match="no safetensors"):
        read_weights(tmp_path / "nothing")
