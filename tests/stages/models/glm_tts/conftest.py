"""The tiny GLM-TTS checkpoint (built once per session by tests/goldens/glm_tts/tiny.py) and one intra-op thread."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.goldens.glm_tts.tiny import build


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def glm_checkpoint(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("glm_tts") / "glm-tts-tiny")
