"""The wheel installs one top-level package, `vocalis`, and nothing generic beside it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_the_vocalis_namespace(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
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
    for folder, package in (("server", "server"), ("stages", "stages"), ("gateway", "gateway"), ("clients", "clients")):
        for source in (ROOT / folder).rglob("*.py"):
            assert f"vocalis/{package}/{source.relative_to(ROOT / folder)}" in names, source
