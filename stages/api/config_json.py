"""Configuration dataclasses from the JSON a checkpoint's publisher wrote (config.json and its nested sections): the
one reader every family's config uses. A family's top-level config reads its checkpoint with `<Config>.from_dir(path)`
(`ConfigFile` where that is `from_dict(data)` over the directory's config.json); each section is
`from_json(Section, data)`."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

T = TypeVar("T")

_SCALARS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _as_declared(value: Any, declared: str) -> Any:
    """A JSON list as a tuple where the field is declared a tuple (nested lists too: `tuple[tuple[int, ...], ...]`)."""
    if isinstance(value, list) and declared.startswith("tuple"):
        inner = declared[len("tuple["):]
        return tuple(_as_declared(v, inner) for v in value)
    return value


def _checked(value: Any, declared: str, name: str) -> Any:
    kinds = _SCALARS.get(declared)
    if kinds is None:
        return value
    if isinstance(value, bool) and declared != "bool" or not isinstance(value, kinds):
        raise ValueError(f"{name} must be {'a number' if declared == 'float' else 'a ' + declared}; got {value!r}")
    return float(value) if declared == "float" else value


def read_json(path: Path, model_type: str | None = None, name: str = "config.json") -> dict[str, Any]:
    """The JSON object of a checkpoint directory's `name` file; with `model_type`, a file whose `model_type` is another
    is refused, naming the file."""
    file = Path(path) / name
    data = json.loads(file.read_text())
    if model_type is not None and data.get("model_type") != model_type:
        raise ValueError(f"{file}: model_type is {data.get('model_type')!r}, not {model_type!r}")
    return data


def from_json(cls: type[T], data: Mapping[str, Any] | None, *, aliases: Mapping[str, str] | None = None,
              where: str | None = None, **sections: Any) -> T:
    """The dataclass `cls` from one JSON object: the keys it declares (a JSON list becomes a tuple where the field is
    declared a tuple), unknown keys ignored, missing ones at the declared defaults. `aliases` map another published
    spelling of a key to the field's name (`{"rms_norm_eps": "norm_eps"}`); the field's own spelling wins over an
    alias. `sections` (nested objects the caller has already built, or values it derives) win over the JSON.

    `where` (the section's name in the file, e.g. "audio_decoder_config") makes the reading strict: a field without a
    default that the JSON lacks, or a scalar field (int, float, bool, str) of another JSON type, is a ValueError
    naming `where.field`; without it a missing field is the dataclass's TypeError and values are taken as written."""
    data = data or {}
    renamed = {aliases[k]: v for k, v in data.items() if aliases and k in aliases} | dict(data)
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in sections:
            continue
        if f.name in renamed:
            value = _as_declared(renamed[f.name], str(f.type))
            values[f.name] = _checked(value, str(f.type), f"{where}.{f.name}") if where else value
        elif where and f.default is MISSING and f.default_factory is MISSING:
            raise ValueError(f"{where}.{f.name} is missing")
    return cls(**(values | sections))


class ConfigFile(ABC):
    """A top-level config read from a checkpoint directory's config.json: `from_dir(path)` is `from_dict` over the
    file, refused (naming it) when its `model_type` is not `MODEL_TYPE` (None: not checked)."""

    MODEL_TYPE: ClassVar[str | None] = None

    @classmethod
    def from_dir(cls, path: Path) -> Self:
        return cls.from_dict(read_json(path, cls.MODEL_TYPE))

    @classmethod
    @abstractmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The config from config.json's parsed object."""
