"""Bad input gets the right status and a message naming the problem; the server keeps serving."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture(scope="module")
def http(server) -> httpx.Client:
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        yield client


CASES = [
    ({"input": ""}, 400, "input", "empty"),
    ({"input": "   "}, 400, "input", "empty"),
    ({"input": "x" * 5001}, 400, "input", "5000"),
    ({"input": "Hi.", "voice": "nobody"}, 404, "voice", "nobody"),
    ({"input": "Hi.", "ref_audio": "data:audio/wav;base64,AAAA"}, 400, "ref_audio", "not supported"),
    ({"input": "Hi.", "speaker_embedding": [0.1, 0.2]}, 400, "speaker_embedding", "not supported"),
    ({"input": "Hi.", "extra_params": {"temperature": 0.3}}, 400, "extra_params", "temperature"),
    ({"input": "Hi.", "extra_params": {"noise_scale": "loud"}}, 400, "extra_params.noise_scale", "number"),
    ({"input": "Hi.", "language": "German"}, 400, "language", "German"),
    ({"input": 42}, 400, "input", "string"),
    ({"input": "Hi.", "speed": "fast"}, 400, "speed", "number"),
    ({"input": "Hi.", "speed": 9}, 400, "speed", "4"),
    ({"input": "Hi.", "speed": 0.1}, 400, "speed", "0.25"),
    ({"input": "Hi.", "response_format": "ogg"}, 400, "response_format", "wav"),
    ({"input": "Hi.", "model": "tts-99"}, 404, "model", "tts-99"),
    ({"input": "Hi.", "sample_rate": 1000}, 400, "sample_rate", "8000"),
    ({}, 400, "input", "required"),
    ({"input": "Hi.", "response_format": "mp3", "sample_rate": 16001}, 400, "sample_rate", "16001"),
]


@pytest.mark.parametrize(("body", "status", "param", "text"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_request(http, body, status, param, text):
    response = http.post("/v1/audio/speech", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status
    assert error["param"] == param, error
    assert text.lower() in error["message"].lower(), error
    assert error["type"] in ("invalid_request_error", "not_found_error")


def test_malformed_json(http):
    response = http.post("/v1/audio/speech", content=b'{"input": "Hi', headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "json" in response.json()["error"]["message"].lower()


def test_server_keeps_serving_after_errors(http, server):
    for body, *_ in CASES:
        http.post("/v1/audio/speech", json=body)
    assert server.alive()
    response = http.post("/v1/audio/speech", json={"input": "Still here."})
    assert response.status_code == 200 and response.content[:4] == b"RIFF"


def test_lone_surrogate_is_a_400(http):
    response = http.post("/v1/audio/speech", content=b'{"input": "a\\udc00b"}', headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
