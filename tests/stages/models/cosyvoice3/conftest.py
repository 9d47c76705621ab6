"""The tiny CosyVoice3 checkpoint (built once per session by tests/goldens/cosyvoice3/tiny.py), its modules, and one
intra-op thread (the tiny modules are many small ops)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.goldens.cosyvoice3.tiny import build


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("cosyvoice3") / "cosyvoice3-tiny")


@pytest.fixture(scope="session")
def modules(tiny_checkpoint):
    from vocalis.stages.models.cosyvoice3.weights import load_modules

    return load_modules(tiny_checkpoint)


def reference_clip(seconds: float = 3.2, rate: int = 16000, seed: int = 0) -> np.ndarray:
    """A voiced-sounding test clip: an amplitude-modulated tone plus a little noise."""
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    return (0.3 * np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 2 * t) + 0.02 * rng.standard_normal(len(t))).astype(np.float32)
