"""The tiny Drama 3 checkpoint (tests/tiny_drama3/build.py), built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_drama3.build import build_checkpoint


@pytest.fixture(scope="session")
def drama3_dir(tmp_path_factory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("drama3") / "tiny-drama3", with_codec=False)
