"""Model families: how a checkpoint directory becomes a LoadedModel, and which family loads which.

A family declares the `model_type` values (from the checkpoint's config.json) it
loads, its deploy defaults, and a load function, as `FAMILY` in its `family.py`.
The families in `vocalis/stages/models/*/family.py` are found there (see
`discover`); families outside this package (tests, plugins) register through
`--family-module MODULE`, a module that defines `FAMILY`. A family module imports
no torch: a server that loads one family never imports the others' dependencies.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vocalis.stages.deploy import DeployConfig

if TYPE_CHECKING:
    from vocalis.stages.model import LoadedModel

BUILTIN_PACKAGE = "vocalis.stages.models"
FAMILY_MODULE = "family"
"""The module of a family's package that defines FAMILY."""


@dataclass(frozen=True)
class ModelFamily:
    name: str
    model_types: tuple[str, ...]
    """config.json `model_type` values this family loads (or `architecture`, in configs without a model_type)."""
    deploy_defaults: Path
    load: Callable[[Path, DeployConfig], LoadedModel]
    """Load the checkpoint at a path with a resolved deploy config."""
    file_set: tuple[str, ...] = ()
    """Files (or folders) that identify the family's checkpoints when they ship no config.json (CosyVoice3)."""


def checkpoint_family(name: str, model_types: tuple[str, ...], package: str, file_set: tuple[str, ...] = ()) -> ModelFamily:
    """The usual family: `deploy.yaml` beside `package`'s family.py, and `package.loader.load(path, deploy)`,
    imported only when a checkpoint is loaded (so registering the family imports no torch)."""

    def load(path: Path, deploy: DeployConfig) -> LoadedModel:
        return importlib.import_module(f"{package}.loader").load(path, deploy)

    folder = Path(importlib.import_module(package).__file__ or "").parent
    return ModelFamily(name=name, model_types=model_types, deploy_defaults=folder / "deploy.yaml", load=load, file_set=file_set)


_FAMILIES: dict[str, ModelFamily] = {}


def register(family: ModelFamily) -> None:
    _FAMILIES[family.name] = family


def import_family_module(module: str) -> ModelFamily:
    family = getattr(importlib.import_module(module), "FAMILY", None)
    if not isinstance(family, ModelFamily):
        raise ValueError(f"module {module} defines no FAMILY (a vocalis.stages.family.ModelFamily)")
    register(family)
    return family


def family_for_checkpoint(path: Path) -> ModelFamily:
    config = path / "config.json"
    if not config.is_file():
        for family in _FAMILIES.values():
            if family.file_set and all((path / name).exists() for name in family.file_set):
                return family
        raise ValueError(f"{path} has no config.json: is it a checkpoint directory?")
    data = json.loads(config.read_text())
    model_type = data.get("model_type") or data.get("architecture", "")  # VoxCPM configs name only an architecture
    for family in _FAMILIES.values():
        if model_type in family.model_types:
            return family
    raise ValueError(f"no model family loads model_type {model_type!r} (from {config}); known: {known_model_types()}")


def builtin_family_modules() -> list[str]:
    """`vocalis.stages.models.<name>.family` for every family package shipped here: adding a folder with a
    family.py is the whole registration."""
    package = importlib.import_module(BUILTIN_PACKAGE)
    modules = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.ispkg and (Path(info.module_finder.path) / info.name / f"{FAMILY_MODULE}.py").is_file():  # type: ignore[union-attr]
            modules.append(f"{BUILTIN_PACKAGE}.{info.name}.{FAMILY_MODULE}")
    return sorted(modules)


def discover(extra_modules: tuple[str, ...] = ()) -> list[ModelFamily]:
    """Register the shipped families and those of `extra_modules` (--family-module)."""
    return [import_family_module(module) for module in (*builtin_family_modules(), *extra_modules)]


def get(name: str) -> ModelFamily:
    return _FAMILIES[name]


def known_model_types() -> list[str]:
    return sorted(t for family in _FAMILIES.values() for t in family.model_types)
