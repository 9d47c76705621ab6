"""A batch whose client leaves stops at once: every item it still holds is cancelled and the queue frees, as for
an abandoned /v1/audio/speech."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from tests.serving import start_server

LONG = " ".join(["The committee met again on Thursday to weigh every proposal on the table in detail."] * 50)


@pytest.fixture(scope="module")
def small_queue(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("batch-queue"), "--max-queued-requests", "8")
    yield running
    running.stop()


def post_and_leave(port: int, body: bytes, after_s: float) -> None:
    """POST `body` to the batch route on a raw socket and close it after `after_s`, without reading an answer."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        head = (
            f"POST /v1/audio/speech/batch HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        time.sleep(after_s)


def test_a_batch_abandoned_after_a_second_frees_the_queue_at_once(small_queue):
    url = small_queue.http_url
    body = json.dumps({"items": [{"input": LONG, "response_format": "pcm"} for _ in range(8)]}).encode()
    post_and_leave(small_queue.http_port, body, after_s=1.0)
    # Still held, the batch's 8 items would fill the queue for many seconds: every ordinary request would be a 429.
    left = time.monotonic()
    statuses = []
    while time.monotonic() - left < 5:
        response = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hello.", "response_format": "pcm"}, timeout=30)
        statuses.append(response.status_code)
        if response.status_code == 200:
            break
        time.sleep(0.1)
    assert statuses[-1] == 200, statuses
    assert time.monotonic() - left < 1.5, statuses
