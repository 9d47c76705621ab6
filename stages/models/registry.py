"""Which model family loads a model spec given on the command line."""

from __future__ import annotations

from pathlib import Path

from vocalis.stages import family as families
from vocalis.stages.deploy import load_deploy
from vocalis.stages.model import LoadedModel

DEFAULT_MODEL = "en_US-joe-medium"


def load_model(
    spec: str | None = None,
    deploy_config: Path | None = None,
    stage_overrides: str | None = None,
    family_modules: tuple[str, ...] = (),
) -> LoadedModel:
    """Load `spec`: empty or "en_US-joe-medium" for the embedded Piper voice, a Piper .onnx file,
    or a checkpoint directory whose config.json `model_type` names a known family."""
    families.discover(family_modules)
    if not spec or spec in (DEFAULT_MODEL, "piper"):
        family, path = families.get("piper"), None
    else:
        path = Path(spec)
        if path.suffix == ".onnx" and path.is_file():
            family = families.get("piper")
        elif path.is_dir():
            family = families.family_for_checkpoint(path)
        else:
            raise ValueError(f"cannot load model {spec!r}: give {DEFAULT_MODEL!r}, a Piper .onnx voice, or a checkpoint directory")
    deploy = load_deploy(family.deploy_defaults, deploy_config, stage_overrides)
    if path is None:
        from vocalis.stages.models.piper.loader import load_piper

        return load_piper(None, deploy)
    return family.load(path, deploy)
