"""Each model family's case for the checks run across families stage by stage (tests/stages/runtime/test_device.py,
test_device_sampling.py, tests/stages/models/test_stage_dtypes.py, test_prompt_cache_stages.py): its tiny checkpoint
(tests/tiny_checkpoints.py; the template's from its own build.py), a short text and the request's fields; its
`ModelFamily` and deploy stages (`case_family`), its loaded model; and a sink that collects a pipeline's audio."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np

from tests import tiny_checkpoints as tiny
from vocalis.stages.api.family import ModelFamily, discover, family_for_checkpoint
from vocalis.stages.api.model import LoadedModel
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.stages.models.registry import load_model
from vocalis.stages.runtime.deploy import load_deploy

TEMPLATE = "vocalis.stages.models._template.family"


class Collect:
    """A request's audio sink: keeps each piece a pipeline puts."""

    def __init__(self) -> None:
        self.pieces: list[np.ndarray] = []

    def put_audio(self, samples) -> None:
        self.pieces.append(np.asarray(samples))

    def close(self, error=None) -> None: ...


def family(name: str, path: Path) -> ModelFamily:
    """The family that serves case `name`'s checkpoint at `path` (the template's is not discovered)."""
    if name == "tiny_tts":
        from vocalis.stages.models._template.family import FAMILY

        return FAMILY
    discover()
    return family_for_checkpoint(path)


def template(root: Path) -> Path:
    return build_checkpoint(root / "tiny-tts")


CASES = {
    "tiny_tts": (template, "hello there", {"max_new_tokens": 12}),
    "qwen3_tts": (partial(tiny.qwen3_tts, variant="cv-0b6"), "Hello there.", {"max_new_tokens": 6}),
    "voxcpm2": (tiny.voxcpm2, "Hello there.", {"max_new_tokens": 4}),
    "omnivoice": (tiny.omnivoice, "Hello there.", {}),
    "cosyvoice3": (tiny.cosyvoice3, "Hello there.", {"max_new_tokens": 4}),
    "glm_tts": (tiny.glm_tts, "Hello there.", {"max_new_tokens": 4}),
    "higgs_audio_v2": (tiny.higgs_audio_v2, "Hello there.", {"max_new_tokens": 11}),  # 3 frames after the BOS frame + 7 delay rows
    "fish_speech": (tiny.fish_speech, "Hello there.", {"max_new_tokens": 4}),
    "voxtral": (tiny.voxtral, "Hello there.", {"max_new_tokens": 4}),
    "auk": (tiny.auk, "Hello there.", {"duration_seconds": 0.08}),  # 4 latent frames
    "gepard": (tiny.gepard, "hello world", {"max_new_tokens": 4}),
    "drama3": (tiny.drama3, "Hello there.", {"max_new_tokens": 4}),
}
"""Each family's case: its tiny checkpoint (found or built under a folder), the text, the request's fields."""
CLONES = {"cosyvoice3", "glm_tts"}
"""Families that need a voice to clone (a reference clip with its transcript) on every request."""


def checkpoint(name: str, root: Path) -> Path:
    """Case `name`'s tiny checkpoint, found or built under `root`."""
    return CASES[name][0](root)


def load(name: str, path: Path, overrides: dict | None = None) -> LoadedModel:
    """Case `name`'s checkpoint loaded as the server would, with `overrides` as --stage-overrides."""
    modules = (TEMPLATE,) if name == "tiny_tts" else ()
    return load_model(str(path), stage_overrides=json.dumps(overrides) if overrides else None, family_modules=modules)


def case_family(name: str, root: Path) -> tuple[Path, ModelFamily, list[str]]:
    """Case `name`'s checkpoint under `root`, its family, and the stage names of the family's deploy defaults."""
    path = checkpoint(name, root)
    served = family(name, path)
    return path, served, [stage.name for stage in load_deploy(served.deploy_defaults).stages]
