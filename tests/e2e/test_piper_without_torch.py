"""The Piper-only install (`pip install '.[piper]'`) serves without torch and the other neural-extra modules.

The server runs with an import hook (a sitecustomize on PYTHONPATH) that makes torch, safetensors and
tokenizers unimportable, as in a venv without the `neural` extra.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
import tomllib

import httpx
import pytest
import soundfile as sf

from tests.audio_checks import assert_speech
from tests.serving import ROOT, start_server

BLOCKED = ("torch", "safetensors", "tokenizers")

SITECUSTOMIZE = textwrap.dedent(f"""
    import importlib.abc
    import sys

    class _BlockNeuralExtra(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, _BlockNeuralExtra())
""")


@pytest.fixture
def without_neural_extra(tmp_path, monkeypatch):
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook_dir), os.environ.get("PYTHONPATH")])))
    return hook_dir


def test_the_piper_install_requires_none_of_the_neural_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    piper_install = [*project["dependencies"], *project["optional-dependencies"]["piper"]]
    names = {re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower() for requirement in piper_install}
    assert not names & set(BLOCKED), names & set(BLOCKED)
    neural = {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in project["optional-dependencies"]["neural"]}
    assert set(BLOCKED) <= neural


def test_the_hook_blocks_torch(without_neural_extra):
    result = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0 and "blocked by the test" in result.stderr


def test_piper_serves_over_http_without_torch(without_neural_extra, tmp_path):
    server = start_server(tmp_path)
    try:
        body = {"input": "No torch was needed for this.", "response_format": "wav"}
        response = httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=60)
        assert response.status_code == 200, response.text
        samples, rate = sf.read(io.BytesIO(response.content))
        assert rate == 22050
        assert_speech(samples, rate)
        streamed = httpx.post(f"{server.http_url}/v1/audio/speech", json={**body, "response_format": "mp3"}, timeout=60)
        assert streamed.status_code == 200
        assert_speech(*sf.read(io.BytesIO(streamed.content)))
    finally:
        server.stop()
    assert "blocked by the test" not in server.log_path.read_text()


def test_a_neural_checkpoint_without_the_extra_says_what_to_install(without_neural_extra):
    checkpoint = ROOT / "tests" / "goldens" / "qwen3_tts" / "cv-0b6"
    result = subprocess.run(
        [sys.executable, "-m", "vocalis.server", "serve", str(checkpoint), "--grpc-address", "127.0.0.1:0", "--port", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode != 0
    assert "neural extra" in result.stderr and "'torch'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
