"""Checkpoint tensors into torch modules: read (whole, or one tensor at a time), fold weight norm, select by prefix,
build a module without initialising it, load strictly.

Loading is strict: every tensor of a file must land in a module, or match a pattern the family declares unused
(training-only parts), and every module tensor must come from the file. A renamed or forgotten key therefore fails
at start-up, naming the keys, not as silently wrong audio.
"""

from __future__ import annotations

import json
import mmap
import re
import struct
import zipfile
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import torch
from safetensors.torch import load_file
from torch import nn

M = TypeVar("M", bound=nn.Module)

Weights = dict[str, torch.Tensor]

WEIGHT_NORM_SPELLINGS = (
    ("weight_g", "weight_v"),  # torch.nn.utils.weight_norm
    ("parametrizations.weight.original0", "parametrizations.weight.original1"),  # torch.nn.utils.parametrizations
)
SHOWN_KEYS = 8
"""Key names an error lists at most, per kind."""


def read_safetensors(path: Path) -> Weights:
    """One .safetensors file, or every one in a directory (sharded checkpoints)."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no safetensors under {path}")
    weights: Weights = {}
    for file in files:
        weights |= load_file(str(file))
    return weights


SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64,
    "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


class LazyWeights(Mapping[str, torch.Tensor]):
    """Tensors by name whose shapes are known without reading them, each read when asked for: `load_strict` checks the
    whole set by shape first and then reads and copies one tensor at a time."""

    @abstractmethod
    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor `name`, known without reading it."""

    @abstractmethod
    def __contains__(self, name: object) -> bool:
        """Whether there is a tensor `name`, without reading it (Mapping's own reads it: `in`, keys() & ...)."""

    def dtype(self, name: str) -> torch.dtype:
        """The dtype of tensor `name`: read from a file's header where there is one, else by reading the tensor."""
        return self[name].dtype


def _read_into_own_memory(file: Path, offset: int, size: int, name: str) -> mmap.mmap:
    """`size` bytes of `file` from `offset`, in an anonymous mapping of their own, unmapped when the tensor made on it is
    dropped: read through malloc, the freed buffers of a load stay resident in the heap (glibc raises its mmap
    threshold to the size of each buffer freed)."""
    raw = mmap.mmap(-1, size)
    with open(file, "rb") as f:
        f.seek(offset)
        if f.readinto(raw) != size:
            raise ValueError(f"{file}: {name} is cut short")
    return raw


class SafetensorsReader(LazyWeights):
    """The tensors of one .safetensors file, of every one in a directory, or of the files listed, each read from disk
    when asked for into memory of its own (not a mapping of the file, whose pages would stay resident while any of its
    tensors is held). `load_strict` copies from it one tensor at a time, so a load holds the module and one tensor, not
    the module and the whole file (read_safetensors: the peak of a float32 module loaded from bfloat16 files is 1.5x
    its weights). Where two files hold a name, the later file's tensor is the one read."""

    def __init__(self, path: Path | Sequence[Path]) -> None:
        if isinstance(path, (str, Path)):
            path = Path(path)
            files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
        else:
            files = [Path(p) for p in path]
        if not files:
            raise ValueError(f"no safetensors under {path}")
        self._where: dict[str, tuple[Path, torch.dtype, tuple[int, ...], int, int]] = {}
        for file in files:
            with open(file, "rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(length))
            for name, entry in header.items():
                if name != "__metadata__":
                    start, end = entry["data_offsets"]
                    self._where[name] = (file, SAFETENSORS_DTYPES[entry["dtype"]], tuple(entry["shape"]), 8 + length + start, end - start)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._where[name][2]

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def take(self, prefix: str) -> SafetensorsReader:
        """The tensors under `prefix`, with it removed from their names (nothing is read)."""
        view = object.__new__(SafetensorsReader)
        view._where = {k[len(prefix):]: v for k, v in self._where.items() if k.startswith(prefix)}
        return view

    def where(self, keep: Callable[[str], bool]) -> SafetensorsReader:
        """The tensors whose names `keep` accepts, under their own names (nothing is read)."""
        view = object.__new__(SafetensorsReader)
        view._where = {k: v for k, v in self._where.items() if keep(k)}
        return view

    def dtype(self, name: str) -> torch.dtype:
        return self._where[name][1]

    def __getitem__(self, name: str) -> torch.Tensor:
        file, dtype, shape, offset, size = self._where[name]
        if not size:
            return torch.empty(shape, dtype=dtype)
        raw = _read_into_own_memory(file, offset, size, name)
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def shape_of(weights: Mapping[str, torch.Tensor], name: str) -> tuple[int, ...]:
    """The shape of tensor `name`, without reading it where `weights` is lazy."""
    return weights.shape(name) if isinstance(weights, LazyWeights) else tuple(weights[name].shape)


def dtype_of(weights: Mapping[str, torch.Tensor], name: str) -> torch.dtype:
    """The dtype of tensor `name`, without reading it where `weights` reads a file's header (SafetensorsReader,
    StateDictReader)."""
    return weights.dtype(name) if isinstance(weights, LazyWeights) else weights[name].dtype


Recipe = tuple[tuple[int, ...], Callable[[], torch.Tensor]]
"""A tensor's shape, and how to make it (read it, and rename, permute or join what a layout needs)."""


class DerivedWeights(LazyWeights):
    """Tensors made from a checkpoint's when asked for, one at a time: for layouts whose names or tensors differ from
    the module's (renamed, permuted rows, joined tables), so that such a load too holds the module and one tensor."""

    def __init__(self, recipes: Mapping[str, Recipe]) -> None:
        self._recipes = dict(recipes)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._recipes[name][0]

    def __contains__(self, name: object) -> bool:
        return name in self._recipes

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._recipes[name][1]()

    def __iter__(self) -> Iterator[str]:
        return iter(self._recipes)

    def __len__(self) -> int:
        return len(self._recipes)


def renamed(source: Mapping[str, torch.Tensor], name: Callable[[str], str | None],
            transform: Callable[[str, torch.Tensor], torch.Tensor] | None = None) -> DerivedWeights:
    """`source`'s tensors under `name(key)` (None: left out), each read, and passed through `transform(new name,
    tensor)` (which keeps its shape), when asked for."""
    recipes: dict[str, Recipe] = {}
    for key in source:
        new = name(key)
        if new is not None:
            def make(key: str = key, new: str = new) -> torch.Tensor:
                return transform(new, source[key]) if transform is not None else source[key]
            recipes[new] = (shape_of(source, key), make)
    return DerivedWeights(recipes)


def merged(*parts: Mapping[str, torch.Tensor]) -> DerivedWeights:
    """The tensors of every part under their own names, each read when asked for; a name in two parts raises."""
    recipes: dict[str, Recipe] = {}
    for part in parts:
        for name in part:
            if name in recipes:
                raise ValueError(f"{name} is made twice")
            recipes[name] = (shape_of(part, name), lambda part=part, name=name: part[name])
    return DerivedWeights(recipes)


def _tensors_of(state: object, path: Path) -> Weights:
    """The tensors of an unpickled state dict (or of its `state_dict` entry); raises if it is something else."""
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
    return dict(state)


def read_state_dict(path: Path) -> Weights:
    """A torch `.pt`/`.pth`/`.bin` state dict, unpickled with weights_only=True (tensors and plain containers only)."""
    return _tensors_of(torch.load(str(path), map_location="cpu", weights_only=True), path)


class StateDictReader(LazyWeights):
    """The tensors of a torch state dict in the zip format (torch.save's since torch 1.6), each read from disk when
    asked for into memory of its own, as SafetensorsReader reads a .safetensors file, so that `load_strict` holds the
    module and one tensor, not the module and the whole unpickled file.

    The pickle is unpickled with weights_only=True onto the meta device: that gives each tensor's shape, dtype,
    strides and the place of its storage in the file (`_checkpoint_offset`, set by torch.load for meta and fake
    tensors, what torch's GPUDirect loading reads offsets from) without reading any tensor data. A tensor is read as
    the bytes its view spans, so views of one shared storage do not each read all of it."""

    def __init__(self, path: Path) -> None:
        self._file = Path(path)
        self._tensors = _tensors_of(torch.load(str(path), map_location="meta", weights_only=True), self._file)
        try:
            self._offsets = {name: tensor.untyped_storage()._checkpoint_offset for name, tensor in self._tensors.items()}
        except AttributeError as error:
            raise ValueError(f"{path}: this torch's load gives no file offsets to read tensors by") from error

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._tensors[name].shape)

    def dtype(self, name: str) -> torch.dtype:
        return self._tensors[name].dtype

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def __getitem__(self, name: str) -> torch.Tensor:
        meta = self._tensors[name]
        if meta.numel() == 0:
            return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype)
        first = meta.storage_offset()
        last = first + sum((size - 1) * stride for size, stride in zip(meta.shape, meta.stride(), strict=True))
        item = meta.element_size()
        offset = self._offsets[name] + first * item
        raw = _read_into_own_memory(self._file, offset, (last - first + 1) * item, name)
        return torch.frombuffer(raw, dtype=torch.uint8).view(meta.dtype).as_strided(meta.shape, meta.stride())

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def state_dict_reader(path: Path) -> Mapping[str, torch.Tensor]:
    """A torch state dict to load from one tensor at a time (StateDictReader); a file in torch's legacy format (not a
    zip archive, written before torch 1.6 or with _use_new_zipfile_serialization=False) has no offsets to read by, and
    is read whole (read_state_dict)."""
    return StateDictReader(path) if zipfile.is_zipfile(path) else read_state_dict(path)


def read_weights(path: Path) -> Weights:
    """Tensors of a checkpoint file or directory, safetensors or a torch state dict, by the file's suffix."""
    path = Path(path)
    if path.is_file() and path.suffix in (".pt", ".pth", ".bin"):
        return read_state_dict(path)
    return read_safetensors(path)


def _norm_dim(g: torch.Tensor) -> int:
    """The dimension weight norm kept: the one axis where the magnitude g is not 1 (-1: a single scalar norm)."""
    dims = [d for d in range(g.dim()) if g.shape[d] != 1]
    return dims[0] if len(dims) == 1 else -1


def fold_weight_norm(weights: Weights) -> Weights:
    """Replace each weight-normed pair (magnitude g, direction v), in either spelling, by weight = g * v / |v|.

    The norm runs over every dimension but the one g keeps (dim 0 for convolutions, 2 for HuBERT's positional conv),
    computed as torch's weight norm does, in float32, and cast back to v's dtype."""
    out = dict(weights)
    for g_name, v_name in WEIGHT_NORM_SPELLINGS:
        for key in [k for k in weights if k.endswith("." + g_name)]:
            prefix = key[: -len(g_name)]
            g, v = out.pop(key), out.pop(prefix + v_name)
            out[prefix + "weight"] = torch._weight_norm(v.float(), g.float(), _norm_dim(g)).to(v.dtype)
    return out


def fold_weight_norm_lazily(weights: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
    """fold_weight_norm, but `weights` as they are (a SafetensorsReader left unread) when none is weight-normed."""
    spellings = tuple("." + name for pair in WEIGHT_NORM_SPELLINGS for name in pair)
    return fold_weight_norm(dict(weights)) if any(k.endswith(spellings) for k in weights) else weights


def take(weights: Weights, prefix: str) -> Weights:
    """The tensors under `prefix`, with it removed from their names."""
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def _listed(keys: list[str]) -> str:
    return f"{keys[:SHOWN_KEYS]}{'...' if len(keys) > SHOWN_KEYS else ''}"


@contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Every parameter a module registers meanwhile is moved to the meta device as it is registered, and torch.nn.init's
    initialisers leave meta tensors alone (nothing is computed or touched); buffers and other tensors are made as
    usual. Skipping the initialisers also skips torch's meta kernels for them, whose first use imports torch._dynamo
    (1.4 s, once per process: a tiny Qwen3-TTS load took 1.05 s instead of 0.10). It patches nn.Module and
    torch.nn.init for the while: models are built at start-up, one at a time, not beside other threads building
    modules."""
    register = nn.Module.register_parameter
    initialisers = {name: initialise for name, initialise in vars(nn.init).items()
                    if name.endswith("_") and not name.startswith("_") and callable(initialise)}

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            module._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    def skipping_meta(initialise: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        def initialise_unless_meta(tensor: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
            return tensor if tensor.device.type == "meta" else initialise(tensor, *args, **kwargs)
        return initialise_unless_meta

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign]
    for name, initialise in initialisers.items():
        setattr(nn.init, name, skipping_meta(initialise))
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]
        for name, initialise in initialisers.items():
            setattr(nn.init, name, initialise)


def build_empty(factory: Callable[[], M], dtype: torch.dtype, device: str | torch.device = "cpu") -> M:
    """The module `factory` makes, its parameters given uninitialised memory in `dtype` (integer ones keep theirs) on
    `device`: no random initialisation and no float32 parameters before a cast, so loading it (load_strict fills every
    parameter) holds the weights in their loaded dtype only. Buffers and tensors the constructor computes (rotary
    tables) are made as usual, in the constructor's dtype: cast them with the module as before. Tied parameters stay
    tied."""
    with _parameters_on_meta():
        module = factory()
    made: dict[int, nn.Parameter] = {}
    for part in module.modules():
        for name, param in part._parameters.items():
            if param is not None and param.device.type == "meta":
                if id(param) not in made:
                    kind = dtype if param.is_floating_point() else param.dtype
                    made[id(param)] = nn.Parameter(torch.empty(param.shape, dtype=kind, device=device), requires_grad=param.requires_grad)
                part._parameters[name] = made[id(param)]
    return module


def load_strict(module: nn.Module, weights: Mapping[str, torch.Tensor], where: object, unused: Iterable[str] = ()) -> nn.Module:
    """Copy `weights` into `module` by name (cast to each tensor's dtype); `unused` are regexes (full match) of keys
    the file may hold that the module knowingly has no use for. Raises ValueError naming missing, unexpected and
    misshapen keys. From LazyWeights (a SafetensorsReader, DerivedWeights), one tensor is read and copied at a time."""
    state = module.state_dict()
    patterns = [re.compile(p) for p in unused]
    unexpected = sorted(k for k in weights if k not in state and not any(p.fullmatch(k) for p in patterns))
    missing = sorted(k for k in state if k not in weights)
    if missing or unexpected:
        raise ValueError(f"{where}: weights do not match the module: missing {_listed(missing)}, unexpected {_listed(unexpected)}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != shape_of(weights, name):
            raise ValueError(f"{where}: {name} has shape {shape_of(weights, name)}, the configuration says {tuple(tensor.shape)}")
    if isinstance(weights, LazyWeights):
        with torch.no_grad():  # what load_state_dict does per tensor (the state dict's tensors are the module's)
            for name, tensor in state.items():
                tensor.copy_(weights[name])
        return module
    module.load_state_dict({k: weights[k] for k in state}, strict=True)
    return module
