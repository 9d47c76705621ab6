"""Model families: how a checkpoint directory becomes a LoadedModel, and which family loads which.

A family declares the `model_type` values (from the checkpoint's config.json) it
loads, its deploy defaults, and a load function, as `FAMILY` in its `family.py`.
The families in `vocalis/stages/models/*/family.py` are found there (see
`discover`); families outside this package (tests, plugins) register through
`--family-module MODULE`, a module that defines `FAMILY`. A family module imports
no torch: a server that loads one family never imports the others' dependencies.
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vocalis.stages.runtime.deploy import DeployConfig

if TYPE_CHECKING:
    from vocalis.stages.api.model import LoadedModel

BUILTIN_PACKAGE = "vocalis.stages.models"
FAMILY_MODULE = "family"
MISTRAL_PARAMS = "params.json"
"""The config of Mistral-format checkpoints (with consolidated.safetensors), read when there is no config.json."""
"""The module of a family's package that defines FAMILY."""


@dataclass(frozen=True)
class ModelFamily:
    name: str
    model_types: tuple[str, ...]
    """config.json `model_type` values this family loads (or `architecture`, in configs without a model_type)."""
    deploy_defaults: Path
    load: Callable[[Path, DeployConfig], LoadedModel]
    """Load the checkpoint at a path with a resolved deploy config."""
    detect: Callable[[Path], bool] | None = None
    """For a published layout without config.json: whether a directory is this family's (by its file names only)."""
    sidecar: str = ""
    """A file beside config.json that the family's checkpoints have and others of the same `model_type` lack (Gepard's
    gepard_config.json beside a `qwen3_5_text` config): the family loads a checkpoint only when it is there."""
    float32_stages: tuple[str, ...] = ()
    """Stages that run in float32 whatever their deploy `dtype` says (a codec kept float by design, an ONNX voice):
    a deploy that sets another dtype on one is refused before the load (registry.py), not served in float32 silently."""
    prompt_cache_stages: tuple[str, ...] = ()
    """Stages that keep recent voices' prompt work within their deploy `prompt_cache_bytes` (CosyVoice3's flow): a
    deploy that sets it on any other stage is refused before the load (registry.py), not ignored silently."""


def checkpoint_family(
    name: str,
    model_types: tuple[str, ...],
    package: str,
    detect: Callable[[Path], bool] | None = None,
    sidecar: str = "",
    file_set: tuple[str, ...] = (),
    float32_stages: tuple[str, ...] = (),
    prompt_cache_stages: tuple[str, ...] = (),
) -> ModelFamily:
    """The usual family: `deploy.yaml` beside `package`'s family.py, and `package.loader.load(path, deploy)`,
    imported only when a checkpoint is loaded (so registering the family imports no torch)."""

    def load(path: Path, deploy: DeployConfig) -> LoadedModel:
        return importlib.import_module(f"{package}.loader").load(path, deploy)

    folder = Path(importlib.import_module(package).__file__ or "").parent
    if file_set and detect is None:  # a published file set without config.json (CosyVoice3)
        detect = functools.partial(_has_files, file_set)
    return ModelFamily(name=name, model_types=model_types, deploy_defaults=folder / "deploy.yaml", load=load, detect=detect, sidecar=sidecar,
                       float32_stages=float32_stages, prompt_cache_stages=prompt_cache_stages)


def _has_files(names: tuple[str, ...], path: Path) -> bool:
    return all((path / name).exists() for name in names)


_FAMILIES: dict[str, ModelFamily] = {}


def register(family: ModelFamily) -> None:
    _FAMILIES[family.name] = family


def import_family_module(module: str) -> ModelFamily:
    family = getattr(importlib.import_module(module), "FAMILY", None)
    if not isinstance(family, ModelFamily):
        raise ValueError(f"module {module} defines no FAMILY (a vocalis.stages.api.family.ModelFamily)")
    register(family)
    return family


def family_for_checkpoint(path: Path) -> ModelFamily:
    config = path / "config.json"
    if not config.is_file() and (path / MISTRAL_PARAMS).is_file():
        config = path / MISTRAL_PARAMS
    if not config.is_file():
        for family in _FAMILIES.values():
            if family.detect is not None and family.detect(path):
                return family
        raise ValueError(f"{path} has no config.json (nor a Mistral-format {MISTRAL_PARAMS}): is it a checkpoint directory?")
    data = json.loads(config.read_text())
    model_type = data.get("model_type") or data.get("architecture", "")  # VoxCPM configs name only an architecture
    if not model_type and config.name == MISTRAL_PARAMS and "audio_tokenizer_args" in (data.get("multimodal") or {}):
        model_type = "voxtral_tts"  # published Voxtral TTS params.json name no model_type; only they carry a codec
    candidates = [family for family in _FAMILIES.values() if model_type in family.model_types]
    for family in sorted(candidates, key=lambda f: not f.sidecar):  # a family known by its sidecar first
        if not family.sidecar or (path / family.sidecar).is_file():
            return family
    if candidates:
        wanted = ", ".join(f"{f.sidecar} ({f.name})" for f in candidates if f.sidecar)
        raise ValueError(f"{config} says model_type {model_type!r}, which is served only with a sidecar file beside it: {wanted}; "
                         f"{path} has none")
    raise ValueError(f"no model family loads model_type {model_type!r} (from {config}); known: {known_model_types()}")


def builtin_family_modules() -> list[str]:
    """`vocalis.stages.models.<name>.family` for every family package shipped here: adding a folder with a
    family.py is the whole registration. A folder whose name starts with `_` (the template family) is not shipped."""
    package = importlib.import_module(BUILTIN_PACKAGE)
    modules = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.ispkg and not info.name.startswith("_") and (Path(info.module_finder.path) / info.name / f"{FAMILY_MODULE}.py").is_file():  # type: ignore[union-attr]
            modules.append(f"{BUILTIN_PACKAGE}.{info.name}.{FAMILY_MODULE}")
    return sorted(modules)


def discover(extra_modules: tuple[str, ...] = ()) -> list[ModelFamily]:
    """Register the shipped families and those of `extra_modules` (--family-module)."""
    return [import_family_module(module) for module in (*builtin_family_modules(), *extra_modules)]


def get(name: str) -> ModelFamily:
    return _FAMILIES[name]


def known_model_types() -> list[str]:
    return sorted(t for family in _FAMILIES.values() for t in family.model_types)
