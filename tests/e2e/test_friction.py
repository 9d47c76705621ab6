"""Rough edges a new user hits first: error envelopes, trailing slashes, empty bodies, form names, signals."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.serving import start_server


def test_validation_messages_carry_no_pydantic_prefix(server):
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hi.", "voice": "a", "speaker": "b"}, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "give voice or speaker, not both"


def test_empty_body_names_the_required_field(server):
    response = httpx.post(f"{server.http_url}/v1/audio/speech", timeout=30)
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "input" and "input" in error["message"]


def test_wrong_method_is_a_client_error(server):
    response = httpx.get(f"{server.http_url}/v1/audio/speech", timeout=30)
    assert response.status_code == 405 and response.json()["error"]["type"] == "invalid_request_error"


def test_trailing_slash_is_served_not_redirected(server):
    response = httpx.post(f"{server.http_url}/v1/audio/speech/", json={"input": "Slash."}, timeout=60)
    assert response.status_code == 200 and response.content[:4] == b"RIFF"


def test_voice_upload_errors_name_the_form_field(server):
    files = {"audio_sample": ("clip.wav", b"RIFF....WAVEnot really audio", "audio/wav")}
    response = httpx.post(f"{server.http_url}/v1/audio/voices", data={"name": "x", "consent": "c"}, files=files, timeout=30)
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "audio_sample" and error["message"].startswith("audio_sample")


def test_sigint_and_sigterm_stop_quietly(tmp_path):
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        (tmp_path / sig.name).mkdir()
    with ThreadPoolExecutor(len(signals)) as pool:  # the two servers start side by side: start-up is mostly waiting
        servers = list(pool.map(lambda sig: start_server(tmp_path / sig.name), signals))
    for sig, running in zip(signals, servers, strict=True):
        running.process.send_signal(sig)
    for running in servers:
        assert running.process.wait(60) == 0
        log = running.log_path.read_text()
        assert "Traceback" not in log and "CancelledError" not in log, log


def test_vocalis_stream_reads_vocalis_server(server, tmp_path):
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "VOCALIS_SERVER": server.grpc_target}
    result = subprocess.run(
        [sys.executable, "-m", "vocalis.server", "stream", "Hello there.", "--rate", "200", "--json", "-o", str(tmp_path / "s.wav")],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) and (tmp_path / "s.wav").stat().st_size > 1000
