"""The VoxCPM2 family as the registry sees it: checkpoints whose config.json names the VoxCPM2 architecture.

Kept free of torch imports, so that a server that loads another family never imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vocalis.stages.deploy import DeployConfig
from vocalis.stages.family import ModelFamily
from vocalis.stages.models.voxcpm2.config import ARCHITECTURE

if TYPE_CHECKING:
    from vocalis.stages.model import LoadedModel

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.voxcpm2.loader import load as load_checkpoint

    return load_checkpoint(path, deploy)


FAMILY = ModelFamily(name="voxcpm2", model_types=(ARCHITECTURE,), deploy_defaults=DEPLOY_DEFAULTS, load=load)
