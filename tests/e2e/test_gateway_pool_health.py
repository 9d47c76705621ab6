"""`vocalis gateway --upstream M=A,B` with a member lost: requests go to the live one, /ready says the pool is degraded.

Two tiny replicas share one --voice-dir (one store) in the pool "tiny"; one of them is killed. Every synthesis and
voice call through the gateway still succeeds (a call that met the dead member before the checks took it out is made
again on the live one: it never reached the first), an upload's answer matches what was stored, /ready reports the
degraded pool, and the member rejoins once it is back; with both members gone /ready is 503 and names the pool that is down.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fleet import voice_clip
from tests.serving import start_gateway, start_server
from vocalis.stages.models._template.build import build_checkpoint

pytestmark = pytest.mark.timeout(240)
TOKENS = 12


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool-health")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
    args = ("--family-module", "vocalis.stages.models._template.family", "--served-model-name", "tiny", "--voice-dir", str(root / "voices"), str(checkpoint))
    with ThreadPoolExecutor(2) as starting:
        a, b = starting.map(lambda _: start_server(root, *args, timeout=90), range(2))
    log_path = root / "gateway.log"
    process, url = start_gateway(log_path, f"tiny={a.grpc_target},{b.grpc_target}")
    restarted: list = []
    yield url, a, b, log_path, args, restarted
    process.terminate()
    process.wait(10)
    for server in (a, b, *restarted):
        if server.alive():
            server.stop()


def served_seconds(server) -> float:
    text = httpx.get(f"{server.http_url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vocalis_audio_seconds_total"))


def speak(url: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/speech", json={"input": "pooled", "max_new_tokens": TOKENS, "response_format": "pcm"}, timeout=60)


def test_a_dead_member_is_left_out_and_ready_says_so(pool):
    url, a, b, log_path, args, restarted = pool
    ready = httpx.get(f"{url}/ready", timeout=10).json()
    assert ready["degraded"] == [] and set(ready["members"]["tiny"].values()) == {"up"}

    os.kill(b.process.pid, signal.SIGKILL)
    b.process.wait(10)
    # At once, before any check noticed: each request that meets the dead member is made again on the live one.
    answers = [speak(url) for _ in range(6)]
    listings = [httpx.get(f"{url}/v1/audio/voices", timeout=30) for _ in range(4)]
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers if r.status_code != 200]
    assert all(len(r.content) == TOKENS * 160 * 2 for r in answers)
    assert [r.status_code for r in listings] == [200] * 4

    upload = httpx.post(f"{url}/v1/audio/voices", data={"name": "Pooled", "consent": "ok"},
                        files={"audio_sample": ("v.wav", voice_clip(3), "audio/wav")}, timeout=60)
    stored = {v["name"] for v in httpx.get(f"{a.http_url}/v1/audio/voices", timeout=30).json()["uploaded_voices"]}
    assert upload.status_code == 200 and upload.json()["voice"]["name"] == "Pooled" and "Pooled" in stored, upload.text

    ready = httpx.get(f"{url}/ready", timeout=10)
    assert ready.status_code == 200, ready.text  # the pool still has a live member
    body = ready.json()
    assert body["degraded"] == ["tiny"] and body["down"] == []
    assert body["members"]["tiny"] == {a.grpc_target: "up", b.grpc_target: "down"}
    assert "taken out of its pool" in log_path.read_text()
    exposition = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'vocalis_gateway_pool_members{pool="tiny"} 2' in exposition
    assert 'vocalis_gateway_pool_members_up{pool="tiny"} 1' in exposition
    assert "vocalis_audio_seconds_total" in exposition  # the live member's own metrics, as before

    assert httpx.delete(f"{url}/v1/audio/voices/pooled", timeout=30).status_code == 200
    assert all(speak(url).status_code == 200 for _ in range(4))

    # The member comes back (on its address): after `rise` passed checks it takes requests again.
    again = log_path.parent / "again"
    again.mkdir()
    b = start_server(again, *args, timeout=90, ports=(b.grpc_port, b.http_port))
    restarted.append(b)
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/ready", timeout=10).json()["degraded"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert httpx.get(f"{url}/ready", timeout=10).json()["members"]["tiny"][b.grpc_target] == "up"
    before = served_seconds(b)
    assert all(speak(url).status_code == 200 for _ in range(4))
    assert served_seconds(b) > before  # in turn with the other member again

    for server in (a, b):
        server.process.send_signal(signal.SIGINT)
    for server in (a, b):
        server.process.wait(60)
    ready = httpx.get(f"{url}/ready", timeout=10)
    assert ready.status_code == 503 and ready.json()["down"] == ["tiny"], ready.text
    refused = speak(url)
    assert refused.status_code == 503 and refused.headers.get("retry-after"), refused.text
