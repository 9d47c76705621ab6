"""`vocalis gateway --upstream MODEL=HOST:PORT[,...]`: one gateway in front of a pool of servers per model."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.serving import start_gateway, start_server
from tests.ws_session import audio, ws_session
from vocalis.stages.models._template.build import build_checkpoint

TOKENS = 12
HOP = 160


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    root = tmp_path_factory.mktemp("pools")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(
            lambda name: start_server(root, "--family-module", "vocalis.stages.models._template.family", "--served-model-name", name, str(checkpoint), timeout=90),
            ("tiny-a", "tiny-b"),
        )
    process, url = start_gateway(root / "gateway.log", f"tiny-a={a.grpc_target}", f"tiny-b={b.grpc_target},{b.grpc_target}")
    yield url, a, b
    process.terminate()
    process.wait(10)
    a.stop()
    b.stop()


def audio_seconds(server) -> float:
    text = httpx.get(f"{server.http_url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vocalis_audio_seconds_total"))


def speak(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/speech", json={"input": "pooled", "max_new_tokens": TOKENS, "response_format": "pcm", **body}, timeout=60)


def test_models_are_merged_and_requests_go_to_their_pool(pools):
    url, a, b = pools
    listed = httpx.get(f"{url}/v1/models", timeout=10).json()["data"]
    assert {m["id"] for m in listed} == {"tiny-a", "tiny-b"}
    assert [m["id"] for m in listed if m["default"]] == ["tiny-a"]  # the first pool is the default
    for model, target, other in (("tiny-b", b, a), ("tiny-a", a, b), (None, a, b)):
        before = (audio_seconds(target), audio_seconds(other))
        response = speak(url, **({"model": model} if model else {}))
        assert response.status_code == 200 and len(response.content) == TOKENS * HOP * 2, response.text
        assert audio_seconds(target) - before[0] == pytest.approx(TOKENS * HOP / 16000) and audio_seconds(other) == before[1]
    unknown = speak(url, model="tiny-c")
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "model"
    assert "tiny-a" in unknown.json()["error"]["message"] and "tiny-b" in unknown.json()["error"]["message"]


def test_websocket_goes_to_its_pool(pools):
    url, a, b = pools
    before = (audio_seconds(a), audio_seconds(b))
    frames = ws_session(f"ws://{url.removeprefix('http://')}/v1/audio/speech/stream",
                        {"model": "tiny-b", "response_format": "pcm", "max_new_tokens": TOKENS}, "over the socket.", timeout=60)
    assert len(audio(frames)) == TOKENS * HOP * 2
    assert audio_seconds(a) == before[0] and audio_seconds(b) - before[1] == pytest.approx(TOKENS * HOP / 16000)


def test_voices_reach_every_pool_and_list_once(pools):
    url, a, b = pools
    buffer = io.BytesIO()
    t = np.arange(24000) / 16000
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * 3 * t) * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000, format="WAV")
    files = {"audio_sample": ("v.wav", buffer.getvalue(), "audio/wav")}
    uploaded = httpx.post(f"{url}/v1/audio/voices", data={"name": "Pooled", "consent": "ok"}, files=files, timeout=60)
    assert uploaded.status_code == 200 and uploaded.json()["pools"] == {"tiny-a": "stored", "tiny-b": "stored"}, uploaded.text
    for server in (a, b):
        assert "Pooled" in httpx.get(f"{server.http_url}/v1/audio/voices", timeout=10).json()["voices"]
    merged = httpx.get(f"{url}/v1/audio/voices", timeout=10).json()
    assert merged["voices"].count("Pooled") == 1
    assert [v["models"] for v in merged["uploaded_voices"] if v["name"] == "Pooled"] == [["tiny-a", "tiny-b"]]
    assert speak(url, model="tiny-b", voice="pooled").status_code == 200
    assert httpx.delete(f"{url}/v1/audio/voices/pooled", timeout=30).status_code == 200
    for server in (a, b):
        assert "Pooled" not in httpx.get(f"{server.http_url}/v1/audio/voices", timeout=10).json()["voices"]
    assert httpx.delete(f"{url}/v1/audio/voices/pooled", timeout=30).status_code == 404


def test_ready_reports_every_pool(pools):
    url, _, _ = pools
    ready = httpx.get(f"{url}/ready", timeout=10)
    assert ready.status_code == 200
    assert set(ready.json()["pools"]) == {"tiny-a", "tiny-b"}
    assert ready.json()["pools"]["tiny-b"]["queued"] == {"tiny-b": 0}
