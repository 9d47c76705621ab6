"""The Piper family as the registry sees it: a Piper .onnx voice (or a folder holding one).

Kept free of torch and onnxruntime imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vocalis.stages.api.family import ModelFamily
from vocalis.stages.runtime.deploy import DeployConfig

if TYPE_CHECKING:
    from vocalis.stages.api.model import LoadedModel

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.piper.loader import load_piper

    voices = sorted(path.glob("*.onnx")) if path.is_dir() else [path]
    if len(voices) != 1:
        raise ValueError(f"{path}: expected exactly one .onnx voice, found {len(voices)}")
    return load_piper(voices[0], deploy)


# The voice is an ONNX graph in float32.
FAMILY = ModelFamily(name="piper", model_types=("piper",), deploy_defaults=DEPLOY_DEFAULTS, load=load, float32_stages=("piper",))
