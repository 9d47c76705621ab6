"""Overload is a fast RESOURCE_EXHAUSTED / 429 with Retry-After, and the server goes on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.serving import start_server


@pytest.fixture(scope="module")
def small_server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("small"), "--max-queued-requests", "1", "--max-input-chars", "200")
    yield running
    running.stop()


def test_queue_full_is_429(small_server):
    text = "This request keeps the only slot busy for a little while, long enough for the others to arrive."

    def post(_: int) -> httpx.Response:
        return httpx.post(f"{small_server.http_url}/v1/audio/speech", json={"input": text}, timeout=60)

    with ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(post, range(6)))
    statuses = sorted(r.status_code for r in responses)
    assert 200 in statuses and 429 in statuses, statuses
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["type"] == "rate_limit_error"
    after = httpx.post(f"{small_server.http_url}/v1/audio/speech", json={"input": "Back to normal."}, timeout=60)
    assert after.status_code == 200


def test_configured_input_limit(small_server):
    response = httpx.post(f"{small_server.http_url}/v1/audio/speech", json={"input": "y" * 201}, timeout=60)
    assert response.status_code == 400
    assert "200 characters" in response.json()["error"]["message"]
