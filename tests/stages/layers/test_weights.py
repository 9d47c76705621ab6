"""stages/layers/weights.py: both weight-norm spellings fold like torch's own weight norm; loading is strict and names keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn.utils import parametrizations, weight_norm

from vocalis.stages.layers.weights import (
    DerivedWeights,
    SafetensorsReader,
    StateDictReader,
    build_empty,
    fold_weight_norm,
    fold_weight_norm_lazily,
    load_strict,
    read_safetensors,
    read_state_dict,
    read_weights,
    renamed,
    state_dict_reader,
    take,
)


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


def test_a_safetensors_reader_loads_what_the_whole_file_loads_one_tensor_at_a_time(tmp_path: Path):
    torch.manual_seed(0)
    source = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Embedding(7, 5))
    tensors = {k: v.to(torch.bfloat16) for k, v in source.state_dict().items()} | {"step": torch.arange(3, dtype=torch.int64), "empty": torch.zeros(0, 3)}
    save_file(tensors, str(tmp_path / "a.safetensors"))
    save_file({"extra": torch.ones(2, 2, dtype=torch.float16)}, str(tmp_path / "b.safetensors"))  # a second shard
    reader = SafetensorsReader(tmp_path)
    whole = read_safetensors(tmp_path)
    assert set(reader) == set(whole) and len(reader) == len(whole)
    for name, tensor in whole.items():
        assert reader.shape(name) == tuple(tensor.shape) and torch.equal(reader[name], tensor) and reader[name].dtype == tensor.dtype
    linear = reader.take("0.")
    assert set(linear) == {"weight", "bias"} and linear.shape("weight") == (5, 6) and torch.equal(linear["bias"], whole["0.bias"])
    from_reader, from_dict = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Embedding(7, 5)), nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Embedding(7, 5))
    load_strict(from_reader, reader, "reader", unused=["step", "extra", "empty"])
    load_strict(from_dict, whole, "dict", unused=["step", "extra", "empty"])
    for (name, a), b in zip(from_reader.state_dict().items(), from_dict.state_dict().values(), strict=True):
        assert a.dtype == torch.float32 and torch.equal(a, b), name  # cast to the module's dtype, as load_state_dict does
    with pytest.raises(ValueError, match=r"0.weight has shape \(5, 6\), the configuration says \(4, 6\)"):
        load_strict(nn.Sequential(nn.Linear(6, 4), nn.LayerNorm(5), nn.Embedding(7, 5)), reader, "reader", unused=["step", "extra", "empty"])
    with pytest.raises(ValueError, match="unexpected"):
        load_strict(nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Embedding(7, 5)), reader, "reader")


def test_a_state_dict_reader_reads_each_tensor_of_a_torch_file_as_torch_load_does(tmp_path: Path):
    """Shapes and dtypes without reading; each tensor read alone, as the span of its view (views of one storage,
    strided and transposed ones, an empty one); a legacy (non-zip) file read whole; pickled objects refused."""
    shared = torch.arange(100, dtype=torch.float32)
    tensors = {"a": torch.randn(3, 4).to(torch.bfloat16), "view": shared[10:20].view(2, 5), "strided": shared[::3],
               "t": torch.randn(4, 3).t(), "empty": torch.zeros(0, 3), "step": torch.tensor([1, 2])}
    torch.save({"state_dict": tensors}, tmp_path / "m.pt")
    whole = read_state_dict(tmp_path / "m.pt")
    reader = state_dict_reader(tmp_path / "m.pt")
    assert isinstance(reader, StateDictReader) and set(reader) == set(whole) == set(tensors) and len(reader) == len(whole)
    for name, tensor in whole.items():
        assert reader.shape(name) == tuple(tensor.shape) and reader.dtype(name) == tensor.dtype, name
        assert torch.equal(reader[name], tensor) and reader[name].stride() == tensor.stride(), name
    assert reader["view"].untyped_storage().nbytes() == 10 * 4  # its span, not the 100 floats it shares
    assert reader["strided"].untyped_storage().nbytes() == (33 * 3 + 1) * 4
    torch.save(tensors, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    legacy = state_dict_reader(tmp_path / "legacy.pt")
    assert isinstance(legacy, dict) and all(torch.equal(legacy[k], v) for k, v in tensors.items())
    torch.save({"a": torch.ones(1), "code": Path("/etc")}, tmp_path / "evil.pt")
    with pytest.raises(Exception, match="[Ww]eights only load failed|Unsupported global"):
        state_dict_reader(tmp_path / "evil.pt")


def test_listed_files_are_read_as_one_and_renamed_tensors_load_one_at_a_time(tmp_path: Path):
    """A layout whose names and rows differ from the module's (Voxtral's permuted q rows, higgs-audio's joined
    tables) loads through DerivedWeights as from the dict it describes, reading each tensor only when it is copied."""
    torch.manual_seed(0)
    save_file({"w.q": torch.randn(4, 3), "w.b": torch.randn(4)}, str(tmp_path / "first.safetensors"))
    save_file({"w.b": torch.ones(4), "skip": torch.zeros(1), "top": torch.randn(2, 3), "bottom": torch.randn(1, 3)},
              str(tmp_path / "second.safetensors"))
    reader = SafetensorsReader([tmp_path / "first.safetensors", tmp_path / "second.safetensors"])
    assert torch.equal(reader["w.b"], torch.ones(4))  # the later file's
    assert set(reader.where(lambda k: k.startswith("w."))) == {"w.q", "w.b"}
    read: list[str] = []
    counting = DerivedWeights({k: (reader.shape(k), lambda k=k: read.append(k) or reader[k]) for k in reader})
    weights = renamed(counting, lambda k: None if k == "skip" else {"w.q": "linear.weight", "w.b": "linear.bias"}.get(k, k),
                      lambda name, t: t.flip(0) if name == "linear.weight" else t)
    assert read == [] and weights.shape("linear.weight") == (4, 3)
    joined = DerivedWeights({**{k: (weights.shape(k), lambda k=k: weights[k]) for k in ("linear.weight", "linear.bias")},
                             "table.weight": ((3, 3), lambda: torch.cat([weights["top"], weights["bottom"]]))})
    module = nn.Module()
    module.linear, module.table = nn.Linear(3, 4, bias=True), nn.Embedding(3, 3)
    copied = []
    original = torch.Tensor.copy_
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.Tensor, "copy_", lambda self, src, *a, **k: copied.append(len(read)) or original(self, src, *a, **k))
        load_strict(module, joined, "derived")
    assert copied == [1, 2, 4]  # each copy right after its own reads: never the whole set first
    assert torch.equal(module.linear.weight, reader["w.q"].flip(0)) and torch.equal(module.linear.bias, torch.ones(4))
    assert torch.equal(module.table.weight, torch.cat([reader["top"], reader["bottom"]]))
    with pytest.raises(ValueError, match=r"table.weight has shape \(3, 3\), the configuration says \(2, 3\)"):
        bad = nn.Module()
        bad.linear, bad.table = nn.Linear(3, 4), nn.Embedding(2, 3)
        load_strict(bad, joined, "derived")


def test_weight_norm_is_folded_lazily_only_where_there_is_some(tmp_path: Path):
    save_file({"a.weight": torch.ones(2, 3)}, str(tmp_path / "plain.safetensors"))
    plain = SafetensorsReader(tmp_path / "plain.safetensors")
    assert fold_weight_norm_lazily(plain) is plain  # nothing read
    conv = parametrizations.weight_norm(nn.Conv1d(3, 4, 5))
    save_file({f"c.{k}": v.contiguous() for k, v in conv.state_dict().items()}, str(tmp_path / "normed.safetensors"))
    folded = fold_weight_norm_lazily(SafetensorsReader(tmp_path / "normed.safetensors"))
    assert set(folded) == {"c.weight", "c.bias"} and torch.equal(folded["c.weight"], conv.weight.detach())


class _Rope:
    def __init__(self) -> None:
        self.inv_freq = 1.0 / 10000 ** (torch.arange(0, 4, 2) / 4)


class _Computed(nn.Module):
    """Parameters (two of them tied), a computed non-persistent buffer and a tensor in a plain attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 5)
        self.head = nn.Linear(5, 7, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.LayerNorm(5)
        self.register_buffer("table", torch.arange(3.0) * 0.5, persistent=False)
        self.rope = _Rope()


def test_build_empty_gives_parameters_memory_in_their_dtype_and_keeps_what_the_constructor_computes(tmp_path: Path):
    torch.manual_seed(0)
    source = _Computed()
    save_file({k: v.to(torch.bfloat16) for k, v in source.state_dict().items()}, str(tmp_path / "m.safetensors"))
    module = load_strict(build_empty(_Computed, torch.bfloat16), SafetensorsReader(tmp_path / "m.safetensors"), "m")
    assert module.head.weight is module.embed.weight  # still tied
    for name, param in module.named_parameters():
        assert param.device.type == "cpu" and param.dtype == torch.bfloat16, name
    for name, tensor in source.state_dict().items():
        assert torch.equal(module.state_dict()[name], tensor.to(torch.bfloat16)), name
    # what the constructor computed is made as usual, in its dtype, not left on the meta device
    assert torch.equal(module.table, torch.arange(3.0) * 0.5) and module.table.dtype == torch.float32
    assert torch.equal(module.rope.inv_freq, source.rope.inv_freq)
    assert nn.Module.register_parameter.__name__ == "register_parameter"  # put back


def test_build_empty_runs_no_initialiser_on_meta():
    """torch's meta kernels for the initialisers import torch._dynamo on first use (1.4 s a process); build_empty skips
    them, and leaves torch.nn.init as it was."""
    code = (
        "import sys, torch\n"
        "from torch import nn\n"
        "from vocalis.stages.layers.weights import build_empty\n"
        "normal = nn.init.normal_\n"
        "module = build_empty(lambda: nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 3), nn.LayerNorm(3)), torch.bfloat16)\n"
        "assert all(p.dtype == torch.bfloat16 and p.device.type == 'cpu' for p in module.parameters())\n"
        "assert nn.init.normal_ is normal\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"
