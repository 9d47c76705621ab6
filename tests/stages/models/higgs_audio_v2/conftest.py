"""The tiny higgs-audio v2 checkpoints (both vocabularies) and the goldens transformers recorded on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.goldens.higgs_audio_v2 import checkpoint

GOLDENS = Path(checkpoint.__file__).parent


@pytest.fixture(scope="session")
def native_dir(tmp_path_factory) -> Path:
    return checkpoint.native(tmp_path_factory.mktemp("higgs") / "tiny-native")


@pytest.fixture(scope="session")
def boson_dir(tmp_path_factory) -> Path:
    return checkpoint.boson(tmp_path_factory.mktemp("higgs") / "tiny-boson")


@pytest.fixture(scope="session")
def goldens() -> tuple[dict, dict]:
    return load_file(str(GOLDENS / "goldens.safetensors")), json.loads((GOLDENS / "goldens.json").read_text())
