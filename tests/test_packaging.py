"""The wheel installs one top-level package, `vocalis`, and nothing generic beside it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_the_vocalis_namespace(tmp_path):
    # Build from a copy: setuptools leaves a build/ folder whose stale files would leak into later wheels.
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns(".venv", "build", ".git", "node_modules", "__pycache__", "*.egg-info", ".pytest_cache")
    shutil.copytree(ROOT, source, ignore=ignore)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("vocalis-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"vocalis", next(n for n in top_level if n.endswith(".dist-info"))}
    for package in ("server", "stages", "gateway", "clients", "tts/v1", "stages/models/piper"):
        assert f"vocalis/{package}/__init__.py" in names, package
    assert "vocalis/tts/v1/synthesizer_pb2.py" in names and "vocalis/tts/v1/synthesizer.proto" in names
    # every Python file of the mapped folders made it into the wheel
    for folder in ("server", "stages", "gateway", "clients"):
        for path in (ROOT / folder).rglob("*.py"):
            assert f"vocalis/{folder}/{path.relative_to(ROOT / folder)}" in names, path
    assert "vocalis/stages/models/piper/deploy.yaml" in names
    # every family's data files too, found rather than listed (setup.py finds the packages, package-data the files)
    data = [*(ROOT / "stages").rglob("deploy.yaml"), *(ROOT / "stages").rglob("*.json")]
    assert len(data) >= 5
    for path in data:
        assert f"vocalis/stages/{path.relative_to(ROOT / 'stages')}" in names, path
