from __future__ import annotations

from pathlib import Path

import pytest

from vocalis.stages.models.auk.loader import load_modules

TINY = Path("tests/goldens/auk/tiny")


@pytest.fixture(scope="session")
def tiny():
    """(config, encoder, dit, vae, prompts) of the tiny base checkpoint."""
    return load_modules(TINY)
