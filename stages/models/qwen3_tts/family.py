"""The Qwen3-TTS family as the registry sees it: checkpoints with config.json model_type "qwen3_tts".

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vocalis.stages.deploy import DeployConfig
from vocalis.stages.family import ModelFamily
from vocalis.stages.models.qwen3_tts.config import MODEL_TYPE

if TYPE_CHECKING:
    from vocalis.stages.model import LoadedModel

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.qwen3_tts.loader import load as load_checkpoint

    return load_checkpoint(path, deploy)


FAMILY = ModelFamily(name="qwen3_tts", model_types=(MODEL_TYPE,), deploy_defaults=DEPLOY_DEFAULTS, load=load)
