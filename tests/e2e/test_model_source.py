"""`vocalis serve MODEL` with a Hugging Face repo id, and `--served-model-name` aliases.

The repo is found in a Hugging Face cache laid out here (HF_HOME, `models--org--name/snapshots/<rev>/`
pointed at by `refs/main`), with HF_HUB_OFFLINE set, so nothing is downloaded.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import httpx
import pytest
import soundfile as sf

from tests.hf_cache import add_to_cache, offline_env
from tests.serving import ROOT, start_server
from vocalis.clients.sync import Client

REPO_ID = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
TINY = ROOT / "tests/goldens/qwen3_tts/cv-0b6"
GREEDY = {"temperature": 0, "subtalker_temperature": 0}


@pytest.fixture(scope="module")
def cached_repo(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf-home")
    add_to_cache(home, REPO_ID, TINY)
    running = start_server(tmp_path_factory.mktemp("hub-serve"), REPO_ID, timeout=120, env=offline_env(home))
    yield running
    running.stop()


def test_repo_id_from_the_offline_cache_is_served_under_the_repo_id(cached_repo):
    listed = httpx.get(f"{cached_repo.http_url}/v1/models", timeout=30).json()
    assert [m["id"] for m in listed["data"]] == [REPO_ID]
    with Client(cached_repo.grpc_target, timeout=60) as client:
        assert [m.name for m in client.list_models()] == [REPO_ID]
    body = {"model": REPO_ID, "input": "Hello.", "voice": "vivian", "max_new_tokens": 6, "extra_params": GREEDY}
    response = httpx.post(f"{cached_repo.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 24000 and 0 < len(samples) <= 6 * 1920
    basename = httpx.post(f"{cached_repo.http_url}/v1/audio/speech", json={**body, "model": "cv-0b6"}, timeout=60)
    assert basename.status_code == 404 and REPO_ID in basename.json()["error"]["message"]


def test_served_model_names_are_the_name_and_its_aliases(tmp_path):
    running = start_server(tmp_path, "--served-model-name", "tts-1", "--served-model-name", "joe")
    try:
        listed = httpx.get(f"{running.http_url}/v1/models", timeout=30).json()["data"]
        assert [(m["id"], m["root"]) for m in listed] == [("tts-1", "tts-1"), ("joe", "tts-1")]
        with Client(running.grpc_target, timeout=60) as client:
            (model,) = client.list_models()
            assert model.name == "tts-1" and list(model.aliases) == ["joe"]
            assert client.get_model("JOE").name == "tts-1"
        for name in ("tts-1", "joe"):
            response = httpx.post(f"{running.http_url}/v1/audio/speech", json={"model": name, "input": "Hi."}, timeout=60)
            assert response.status_code == 200, response.text
        unknown = httpx.post(f"{running.http_url}/v1/audio/speech", json={"model": "en_US-joe-medium", "input": "Hi."}, timeout=60)
        assert unknown.status_code == 404 and "tts-1, joe" in unknown.json()["error"]["message"]
    finally:
        running.stop()


def test_a_repo_neither_cached_nor_downloadable_is_a_clear_error(tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "vocalis.server", "serve", "nobody/no-such-tts", "--port", "0", "--grpc-address", "127.0.0.1:0"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "nobody/no-such-tts" in result.stderr and "HF_HUB_OFFLINE" in result.stderr and str(tmp_path) in result.stderr
    assert "Traceback" not in result.stderr
