"""Which model family loads a model spec given on the command line."""

from __future__ import annotations

import logging
from pathlib import Path

from vocalis.stages.api import family as families
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.models.hub_checkpoint import looks_like_repo_id, resolve_repo
from vocalis.stages.runtime import weight_quantization
from vocalis.stages.runtime.cpu_features import lacks_native
from vocalis.stages.runtime.deploy import DeployConfig, load_deploy

log = logging.getLogger(__name__)

DEFAULT_MODEL = "en_US-joe-medium"
NEURAL_MODULES = ("torch", "safetensors", "tokenizers", "tiktoken")
"""Installed by the `neural` extra; the Piper-only install has none of them."""


def load_model(
    spec: str | None = None,
    deploy_config: Path | None = None,
    stage_overrides: str | None = None,
    family_modules: tuple[str, ...] = (),
    served_names: tuple[str, ...] = (),
) -> LoadedModel:
    """Load `spec`: empty or "en_US-joe-medium" for the embedded Piper voice, a Piper .onnx file,
    a checkpoint directory whose config.json `model_type` names a known family, or a Hugging Face
    Hub repo id (from the local cache, else downloaded).

    The model is served as `served_names[0]` and accepts the rest as aliases; without names,
    under the repo id when one was given, else the family's own name for the checkpoint."""
    model = _load(spec, deploy_config, stage_overrides, family_modules)
    names = served_names or ((spec,) if spec and looks_like_repo_id(spec) else ())
    if names:
        model.name, model.aliases = names[0], tuple(dict.fromkeys(n for n in names[1:] if n != names[0]))
    return model


def _load(spec: str | None, deploy_config: Path | None, stage_overrides: str | None, family_modules: tuple[str, ...]) -> LoadedModel:
    families.discover(family_modules)
    if not spec or spec in (DEFAULT_MODEL, "piper"):
        family, path = families.get("piper"), None
    else:
        path = Path(spec)
        if path.suffix == ".onnx" and path.is_file():
            family = families.get("piper")
        elif path.is_dir():
            family = families.family_for_checkpoint(path)
        elif looks_like_repo_id(spec):
            path = resolve_repo(spec)
            family = families.family_for_checkpoint(path)
        else:
            raise ValueError(
                f"cannot load model {spec!r}: give {DEFAULT_MODEL!r}, a Piper .onnx voice, a checkpoint directory or a Hugging Face repo id"
            )
    deploy = load_deploy(family.deploy_defaults, deploy_config, stage_overrides)
    _refuse_fixed_dtypes(family, deploy)
    _refuse_unread_prompt_cache(family, deploy)
    _warn_emulated_half(family.name, deploy)
    try:
        if path is None:
            from vocalis.stages.models.piper.loader import load_piper

            model = load_piper(None, deploy)
        else:
            model = family.load(path, deploy)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in NEURAL_MODULES:
            raise
        raise ValueError(
            f"the {family.name} family needs {error.name!r}, which the Piper-only install leaves out: "
            "install the neural extra (pip install -e '.[piper,neural]' or pip install 'vocalis[neural]')"
        ) from error
    refused = weight_quantization.unapplied({stage.name: stage.quantize for stage in deploy.stages}, model.quantized)
    if refused:
        model.close()
        raise ValueError(f"the {family.name} family cannot quantise stage(s) {refused} (quantize "
                         f"{[deploy.stage(name).quantize for name in refused]}; quantised: {sorted(model.quantized) or 'none'}): "
                         "set quantize: none on them")
    return model


def _warn_emulated_half(family: str, deploy: DeployConfig) -> None:
    """A half-precision stage on a CPU without native instructions for it runs, slower than float32: say so."""
    for stage in deploy.stages:
        if stage.device.startswith("cpu") and lacks_native(stage.dtype):
            log.warning("%s stage %r runs in %s on a CPU without native %s instructions: the results are the same, "
                        "the weights take half the memory, but it computes slower than float32", family, stage.name,
                        stage.dtype, stage.dtype)


def _refuse_fixed_dtypes(family: families.ModelFamily, deploy: DeployConfig) -> None:
    """The same answer from every family to a dtype one of its stages cannot take: refused by name before the load."""
    refused = [stage for stage in deploy.stages if stage.name in family.float32_stages and stage.dtype != "float32"]
    if refused:
        raise ValueError(f"the {family.name} family runs stage(s) {[stage.name for stage in refused]} in float32 only "
                         f"(dtype {[stage.dtype for stage in refused]}): set dtype: float32 on them, or leave dtype out")


def _refuse_unread_prompt_cache(family: families.ModelFamily, deploy: DeployConfig) -> None:
    """A prompt cache set on a stage that keeps no prompt work would be ignored: refused by name before the load."""
    refused = [stage.name for stage in deploy.stages if stage.prompt_cache_bytes and stage.name not in family.prompt_cache_stages]
    if refused:
        kept = f"only {list(family.prompt_cache_stages)} keep(s) one" if family.prompt_cache_stages else "none of its stages keeps one"
        raise ValueError(f"the {family.name} family has no prompt cache on stage(s) {refused} ({kept}): "
                         "set prompt_cache_bytes: 0 on them, or leave it out")
