"""The tiny Gepard checkpoint (tests/tiny_gepard/build.py), built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_gepard.build import build_checkpoint


@pytest.fixture(scope="session")
def gepard_dir(tmp_path_factory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("gepard") / "tiny-gepard")
