"""POST /v1/audio/speech/batch: vLLM-Omni's request and response shape, per-item results, limits."""

from __future__ import annotations

import base64
import io

import httpx
import soundfile as sf

from tests.serving import start_server


def batch(server, body, timeout: float = 120) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech/batch", json=body, timeout=timeout)


def test_items_inherit_the_batch_fields_and_override_them(server):
    body = {
        "items": [
            {"input": "First sentence."},
            {"input": "First sentence.", "response_format": "pcm", "speed": 2.0},
            {"input": "   "},
        ],
        "response_format": "wav",
        "voice": "en_US-joe-medium",
        "speed": 1.0,
        "seed": 5,  # Piper's phoneme durations are random unless seeded: the length check below needs the same draw
    }
    response = batch(server, body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["id"].startswith("speech-batch-") and (data["total"], data["succeeded"], data["failed"]) == (3, 2, 1)
    first, second, empty = data["results"]
    assert [r["index"] for r in data["results"]] == [0, 1, 2]
    assert first["status"] == "success" and first["media_type"] == "audio/wav"
    samples, rate = sf.read(io.BytesIO(base64.b64decode(first["audio_data"])))
    assert rate == 22050 and len(samples) > 0.5 * rate
    assert second["status"] == "success" and second["media_type"] == "audio/pcm"
    assert 0.3 < len(base64.b64decode(second["audio_data"])) / 2 / len(samples) < 0.7  # the same text twice as fast
    assert empty == {"index": 2, "status": "error", "audio_data": None, "media_type": None, "error": empty["error"]}
    assert "empty" in empty["error"]


def test_bad_items_fail_alone_and_the_whole_batch_fails_only_for_the_batch(server):
    response = batch(server, {"items": [{"input": "Fine."}, {"input": "Unknown voice.", "voice": "nobody"}]})
    assert response.status_code == 200
    fine, unknown = response.json()["results"]
    assert fine["status"] == "success" and unknown["status"] == "error" and "nobody" in unknown["error"]
    assert batch(server, {"items": []}).status_code == 400
    too_many = batch(server, {"items": [{"input": "x"}] * 33})
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "items"
    too_fast = batch(server, {"items": [{"input": "Too fast.", "speed": 9}]}).json()["results"][0]
    assert too_fast["status"] == "error" and "speed must be from 0.25 to 4" in too_fast["error"]  # the server's rule
    missing = batch(server, {"model": "tts-99", "items": [{"input": "x"}]})
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "model"
    too_long = batch(server, {"model": "m" * 1_000_000, "items": [{"input": "x"}]})
    assert too_long.status_code == 400, too_long.text
    error = too_long.json()["error"]
    assert error["param"] == "model" and error["reason"] == "FIELD_TOO_LONG" and error["message"].startswith("model "), error
    assert "at most 256" in error["message"] and len(error["message"]) < 200, error
    empty_body = httpx.post(f"{server.http_url}/v1/audio/speech/batch", timeout=30)
    assert empty_body.status_code == 400 and empty_body.json()["error"]["param"] == "items"


def test_items_are_bounded_by_the_servers_admission(tmp_path):
    running = start_server(tmp_path, "--max-queued-requests", "1")
    try:
        response = batch(running, {"items": [{"input": f"Item number {i}."} for i in range(4)]})
        assert response.status_code == 200
        results = response.json()["results"]
        refused = [r for r in results if r["status"] == "error"]
        assert results[0]["status"] == "success"
        assert all("busy" in r["error"] for r in refused)
        assert httpx.post(f"{running.http_url}/v1/audio/speech", json={"input": "Still serving."}, timeout=60).status_code == 200
    finally:
        running.stop()
