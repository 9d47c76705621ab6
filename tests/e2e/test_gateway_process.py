"""`vocalis gateway --upstream` runs the gateway alone, as a gRPC client of another process."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import httpx
import pytest
import soundfile as sf

from tests.serving import free_port


@pytest.fixture(scope="module")
def gateway(server, tmp_path_factory):
    port = free_port()
    log = (tmp_path_factory.mktemp("gateway") / "gateway.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "vocalis.server", "gateway", "--upstream", server.grpc_target, "--host", "127.0.0.1", "--port", str(port),
            "--max-body-bytes", str(2**20), "--batch-max-items", "2",  # below the defaults (32 MiB, 32), to show the flags work
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(10)


def test_standalone_gateway_speaks(gateway):
    response = httpx.post(f"{gateway}/v1/audio/speech", json={"input": "Through a separate gateway."}, timeout=60)
    assert response.status_code == 200
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 22050 and len(samples) > 11025


def test_gateway_flags_set_its_limits(gateway):
    big = httpx.post(f"{gateway}/v1/audio/speech", json={"input": "x" * (2**20 + 10)}, timeout=60)
    assert big.status_code == 413 and "1 MiB" in big.json()["error"]["message"], big.text
    items = [{"input": "One."}, {"input": "Two."}, {"input": "Three."}]
    batch = httpx.post(f"{gateway}/v1/audio/speech/batch", json={"items": items}, timeout=60)
    assert batch.status_code == 400 and "at most 2 items" in batch.json()["error"]["message"], batch.text


def test_standalone_gateway_reports_upstream_down():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "vocalis.server", "gateway", "--upstream", f"127.0.0.1:{free_port()}", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert health.status_code == 503
        response = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", json={"input": "Anyone there?"}, timeout=30)
        assert response.status_code == 503, response.text
        assert response.json()["error"]["type"] == "service_unavailable_error"
    finally:
        process.terminate()
        process.wait(10)
