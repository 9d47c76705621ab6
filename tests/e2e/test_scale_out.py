"""Three replicas of the tiny family behind HAProxy (deploy/haproxy/haproxy.cfg), sharing one PostgreSQL voice store.

PostgreSQL and HAProxy are Debian's packages (installed by .ci/run); the test starts its own temporary cluster and
proxy on free loopback ports. The tests run in file order: the last two stop (kill -STOP) and then end (SIGTERM)
a replica.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest
from websockets.sync.client import connect

from tests.fleet import start_nginx, start_proxy, voice_clip
from tests.postgres_cluster import postgres_bindir, require, start_cluster
from tests.serving import start_server
from tests.ws_session import audio, receive, ws_session
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

pytestmark = pytest.mark.timeout(120)
CHECK_INTER_S = 0.5
CHECK_FALL = 2
TOKENS = 20
HOP = 160


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    require("postgresql", postgres_bindir() is not None)
    require("haproxy", shutil.which("haproxy") is not None or os.path.exists("/usr/sbin/haproxy"))
    root = tmp_path_factory.mktemp("scale-out")
    cluster = start_cluster()
    replicas, proxy = [], None
    try:
        checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
        args = ("--family-module", "vocalis.stages.models._template.family", "--voice-store", cluster.url, "--drain-grace", "20", str(checkpoint))
        with ThreadPoolExecutor(3) as pool:
            replicas = list(pool.map(lambda _: start_server(root, *args, timeout=90), range(3)))
        # A second pool, as an operator would add one for another model: here replica 1 alone, under the name "solo".
        pools = root / "pools.cfg"
        pools.write_text(f"backend vocalis_grpc_solo\n    server r1 {replicas[0].grpc_target} proto h2\n")
        proxy = start_proxy(replicas, root, check_inter=f"{int(CHECK_INTER_S * 1000)}ms", check_fall=CHECK_FALL, extra_configs=[pools])
        for name in ("r1", "r2", "r3"):
            proxy.wait_for(name, "UP", timeout=10)
        yield replicas, proxy
    finally:
        if proxy is not None:
            proxy.stop()
        for replica in replicas:
            if replica.alive():
                os.kill(replica.process.pid, signal.SIGCONT)
                replica.process.send_signal(signal.SIGINT)  # as RunningServer.stop: no drain delay
        for replica in replicas:
            replica.stop()
        cluster.stop()


def upload(url: str, name: str, seed: int) -> httpx.Response:
    files = {"audio_sample": ("voice.wav", voice_clip(seed), "audio/wav")}
    return httpx.post(f"{url}/v1/audio/voices", data={"name": name, "consent": "ok"}, files=files, timeout=60)


def names(url: str) -> set[str]:
    response = httpx.get(f"{url}/v1/audio/voices", timeout=30)
    assert response.status_code == 200, response.text
    return {v["name"] for v in response.json()["uploaded_voices"]}


def speak(target: str, voice: str, text: str = "hello there", timeout: float = 30) -> bytes:
    with Client(target, timeout=timeout) as client:
        config = pb.SessionConfig(voice=voice, encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=TOKENS)
        return client.synthesize(config, text).audio


def replica_metric(proxy, replica: str, name: str) -> float:
    """Sum of one metric family's samples on one replica, scraped through the proxy's /replicas/<name>/metrics."""
    response = httpx.get(f"{proxy.http_url}/replicas/{replica}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return sum(float(line.rsplit(" ", 1)[1]) for line in response.text.splitlines() if line.startswith(name))


def test_probes_and_admission_state(fleet):
    replicas, _ = fleet
    url = replicas[0].http_url
    assert httpx.get(f"{url}/live", timeout=5).json()["status"] == "live"
    assert httpx.get(f"{url}/startup", timeout=5).json()["status"] == "started"
    ready = httpx.get(f"{url}/ready", timeout=5)
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "state": "serving", "sessions": 0, "limit": 64, "queued": {"tiny-tts": 0}}
    metrics = httpx.get(f"{url}/metrics", timeout=5).text
    assert "vocalis_ready 1.0" in metrics and 'vocalis_admission_limit{model="tiny-tts"} 64.0' in metrics
    assert "vocalis_sessions_in_flight 0.0" in metrics


def test_upload_on_a_used_on_c_deleted_on_b_refused_everywhere(fleet):
    (a, b, c), proxy = fleet
    preset = speak(c.grpc_target, "tiny")
    assert upload(a.http_url, "Shared", seed=1).status_code == 200
    on_c = speak(c.grpc_target, "shared")
    assert len(on_c) == TOKENS * HOP * 2 and on_c != preset
    assert speak(a.grpc_target, "SHARED") == on_c == speak(proxy.grpc_target, "Shared")
    assert "Shared" in names(b.http_url) and "Shared" in names(proxy.http_url)

    assert httpx.delete(f"{b.http_url}/v1/audio/voices/shared", timeout=30).status_code == 200
    for target in (a.grpc_target, b.grpc_target, c.grpc_target, proxy.grpc_target):
        with pytest.raises(VocalisError) as caught:
            speak(target, "shared")
        assert caught.value.code == grpc.StatusCode.NOT_FOUND and "shared" in str(caught.value)
    for url in (a.http_url, c.http_url, proxy.http_url):
        response = httpx.post(f"{url}/v1/audio/speech", json={"input": "hi", "voice": "shared", "max_new_tokens": 5}, timeout=30)
        assert response.status_code == 404 and response.json()["error"]["param"] == "voice"


def _two_part_session(target: str, voice: str, between=lambda: None) -> tuple[bytes, bytes]:
    """Audio of "first part." (flushed) and "second part." of one session; `between` runs after the first's FlushDone."""
    parts: list[bytearray] = [bytearray(), bytearray()]
    with Client(target, timeout=60) as client:
        session = client.session(pb.SessionConfig(voice=voice, encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=TOKENS))
        session.send("first part.")
        session.flush("one")
        part = 0
        for response in session:
            kind = response.WhichOneof("response")
            if kind == "audio":
                parts[part] += response.audio.audio
            elif kind == "flush_done":
                between()
                part = 1
                session.send(" second part.")
                session.end()
    return bytes(parts[0]), bytes(parts[1])


def test_reupload_during_a_stream_does_not_change_it(fleet):
    (a, b, c), _ = fleet
    assert upload(a.http_url, "Moving", seed=2).status_code == 200
    reference = _two_part_session(b.grpc_target, "moving")
    during = _two_part_session(c.grpc_target, "moving", between=lambda: upload(a.http_url, "Moving", seed=3).raise_for_status())
    assert during == reference and len(during[1]) == TOKENS * HOP * 2
    after = _two_part_session(c.grpc_target, "moving")
    assert after[1] != reference[1]  # the new generation is what new sessions get


def test_concurrent_uploads_and_deletes_across_replicas(fleet):
    replicas, proxy = fleet
    before = names(proxy.http_url)
    urls = [r.http_url for r in replicas] + [proxy.http_url]

    def work(i: int) -> None:
        assert upload(urls[i % 4], f"bulk-{i}", seed=10 + i).status_code == 200
        if i % 2:
            assert httpx.delete(f"{urls[(i + 1) % 4]}/v1/audio/voices/bulk-{i}", timeout=30).status_code == 200
        else:
            assert upload(urls[(i + 2) % 4], f"bulk-{i}", seed=100 + i).status_code == 200

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(25)))  # 25 uploads, then 13 re-uploads and 12 deletes: 50 changes
    expected = before | {f"bulk-{i}" for i in range(25) if i % 2 == 0}
    assert all(names(url) == expected for url in urls)


def test_websocket_stays_on_its_replica_and_metrics_come_through_the_proxy(fleet):
    _, proxy = fleet
    seconds_before = {r: replica_metric(proxy, r, "vocalis_audio_seconds_total") for r in ("r1", "r2", "r3")}
    url = f"ws://127.0.0.1:{proxy.http_port}/v1/audio/speech/stream"
    with connect(url) as ws:
        pinned = ws.response.headers["x-vocalis-replica"]
        ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "max_new_tokens": TOKENS}))
        for piece in ("One sentence.", " Another one.", " And a third."):
            ws.send(json.dumps({"type": "input.text", "text": piece}))
            ws.send(json.dumps({"type": "input.flush"}))
        ws.send(json.dumps({"type": "input.done"}))
        received = len(audio(receive(ws, timeout=60)))
    assert received == 3 * TOKENS * HOP * 2
    grown = {r: replica_metric(proxy, r, "vocalis_audio_seconds_total") - seconds_before[r] for r in seconds_before}
    assert grown[pinned] == pytest.approx(3 * TOKENS * HOP / 16000)
    assert all(value == 0 for name, value in grown.items() if name != pinned), grown

    exporter = httpx.get(proxy.metrics_url, timeout=10).text
    for backend in ("vocalis_grpc", "vocalis_http"):
        assert proxy.server_states(backend) == {"r1": "UP", "r2": "UP", "r3": "UP"}
        for server in ("r1", "r2", "r3"):
            assert f'haproxy_server_check_status{{proxy="{backend}",server="{server}"' in exporter
    assert 'haproxy_backend_http_requests_total{proxy="vocalis_http"}' in exporter


def test_the_nginx_variant_carries_grpc_http_and_websocket(fleet, tmp_path):
    require("nginx", shutil.which("nginx") is not None or os.path.exists("/usr/sbin/nginx"))
    replicas, _ = fleet
    nginx = start_nginx(replicas, tmp_path)
    try:
        target = f"127.0.0.1:{nginx.grpc_port}"
        assert all(len(speak(target, "tiny")) == TOKENS * HOP * 2 for _ in range(3))
        answers = [httpx.post(f"http://127.0.0.1:{nginx.http_port}/v1/audio/speech", json={"input": "hi", "max_new_tokens": 5}, timeout=30)
                   for _ in range(3)]
        assert all(r.status_code == 200 and r.headers["x-sample-rate"] == "16000" for r in answers)
        assert len({r.headers["x-vocalis-upstream"] for r in answers}) > 1  # least_conn spread them
        frames = ws_session(f"ws://127.0.0.1:{nginx.http_port}/v1/audio/speech/stream",
                            {"response_format": "pcm", "max_new_tokens": TOKENS}, "through nginx.", timeout=60)
        assert len(audio(frames)) == TOKENS * HOP * 2
    finally:
        nginx.stop()


def test_grpc_metadata_picks_the_pool(fleet):
    _, proxy = fleet
    before = {r: replica_metric(proxy, r, "vocalis_audio_seconds_total") for r in ("r1", "r2", "r3")}
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=TOKENS)
    with Client(proxy.grpc_target, timeout=30, metadata=(("x-vocalis-model", "Solo"),)) as client:
        for _ in range(4):
            assert len(client.synthesize(config, "to the solo pool").audio) == TOKENS * HOP * 2
    grown = {r: replica_metric(proxy, r, "vocalis_audio_seconds_total") - before[r] for r in before}
    assert grown == {"r1": pytest.approx(4 * TOKENS * HOP / 16000), "r2": 0, "r3": 0}
    with Client(proxy.grpc_target, timeout=30, metadata=(("x-vocalis-model", "no-such-pool"),)) as client:
        assert len(client.synthesize(config, "to the default pool").audio) == TOKENS * HOP * 2


def _closed_loop(target: str, stop: threading.Event, results: list, workers: int = 4) -> list[threading.Thread]:
    def loop(worker: int) -> None:
        with Client(target, timeout=4) as client:
            config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=TOKENS)
            while not stop.is_set():
                started = time.monotonic()
                try:
                    audio = client.synthesize(config, f"load {worker}").audio
                    results.append((started, time.monotonic(), len(audio) == TOKENS * HOP * 2, None))
                except VocalisError as error:
                    results.append((started, time.monotonic(), False, error.code))

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    return threads


def test_a_stopped_replica_is_taken_out_and_the_others_serve(fleet):
    replicas, proxy = fleet
    voices_before = names(proxy.http_url)
    stop, results = threading.Event(), []
    threads = _closed_loop(proxy.grpc_target, stop, results)
    time.sleep(1.0)  # the load is running on every replica
    stopped = replicas[1]
    os.kill(stopped.process.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        taken_out_after = proxy.wait_for("r2", "DOWN", timeout=10)
        out_at = time.monotonic()
        time.sleep(2.0)  # load on the two others only
    finally:
        os.kill(stopped.process.pid, signal.SIGCONT)
    stop.set()
    for thread in threads:
        thread.join(10)
    # Down after `fall` failed checks, each at most an interval plus the 1 s check timeout.
    assert taken_out_after <= CHECK_FALL * (CHECK_INTER_S + 1.0) + 1.0, taken_out_after
    after = [r for r in results if r[0] >= out_at]
    assert len(after) >= 4 and all(ok for _, _, ok, _ in after), after
    before = [r for r in results if r[1] < stopped_at]
    assert before and all(ok for _, _, ok, _ in before)
    # Requests caught on the stopped replica either finished after SIGCONT or failed with a deadline, nothing else.
    assert all(ok or code == grpc.StatusCode.DEADLINE_EXCEEDED for _, _, ok, code in results), results
    proxy.wait_for("r2", "UP", timeout=10)
    assert names(proxy.http_url) == voices_before == names(stopped.http_url)


def test_sigterm_drains_a_replica(fleet):
    replicas, proxy = fleet
    leaving = replicas[2]
    long_stream: dict = {}

    def run_stream() -> None:
        with Client(leaving.grpc_target, timeout=60) as client:
            config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=150)
            long_stream["audio"] = client.synthesize(config, "a long running stream").audio

    streaming = threading.Thread(target=run_stream)
    streaming.start()
    deadline = time.monotonic() + 10
    while httpx.get(f"{leaving.http_url}/ready", timeout=5).json()["sessions"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    leaving.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while (draining := httpx.get(f"{leaving.http_url}/ready", timeout=5)).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.02)  # the signal is handled on the replica's event loop
    assert draining.status_code == 503 and draining.json()["state"] == "draining"
    assert "vocalis_ready 0.0" in httpx.get(f"{leaving.http_url}/metrics", timeout=5).text
    assert httpx.get(f"{leaving.http_url}/live", timeout=5).status_code == 200  # draining is not dead
    proxy.wait_for("r3", "DOWN", timeout=CHECK_FALL * (CHECK_INTER_S + 1.0) + 2)
    served_by = [httpx.post(f"{proxy.http_url}/v1/audio/speech", json={"input": "after", "max_new_tokens": 5}, timeout=30)
                 for _ in range(6)]
    assert all(r.status_code == 200 for r in served_by)
    assert {r.headers["x-vocalis-replica"] for r in served_by} <= {"r1", "r2"}
    streaming.join(30)
    assert len(long_stream["audio"]) == 150 * HOP * 2  # finished within the grace
    assert leaving.process.wait(20) == 0
