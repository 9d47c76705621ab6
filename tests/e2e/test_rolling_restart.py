"""Three replicas behind the shipped HAProxy config, rolled, killed and restored under load, as an operator would.

Eight HTTP clients, each one `httpx.Client` keeping its cookies (as the OpenAI SDK does), and two gRPC clients send
short speech requests without pause through the proxy. One run:
  - a rolling restart: each replica in turn gets SIGTERM, exits, starts again on its ports and rejoins: 0 requests lost;
  - one replica SIGKILLed: only requests in flight at that moment may fail; it leaves the pool and comes back;
  - nine requests from one cookie-keeping client are answered by more than one replica;
  - requests that meet a replica refusing with 503, or a closed gRPC port, are retried on another (retry-on).
The figures (requests lost per step, time to leave the pool, to rejoin) are printed for BENCHMARKS.md.
"""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace

import httpx
import pytest

from tests.fleet import start_proxy
from tests.postgres_cluster import postgres_bindir, require, start_cluster
from tests.serving import RunningServer, free_port, start_server
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

pytestmark = pytest.mark.timeout(600)
CHECK_INTER_S = 1.0  # the shipped config's documented timing: inter 1 s, fall 2, timeout check 1 s
CHECK_FALL = 2
HTTP_CLIENTS = 4  # with the gRPC clients, about two requests in flight on each replica at any moment
GRPC_CLIENTS = 2
TOKENS = 8


@dataclass
class Outcome:
    started: float
    ended: float
    ok: bool
    detail: str


class Load:
    """Closed-loop clients through the proxy, recording every request's outcome."""

    def __init__(self, http_url: str, grpc_target: str) -> None:
        self.http_url = http_url
        self.grpc_target = grpc_target
        self.outcomes: list[Outcome] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._http, args=(i,), daemon=True) for i in range(HTTP_CLIENTS)]
        self.threads += [threading.Thread(target=self._grpc, args=(i,), daemon=True) for i in range(GRPC_CLIENTS)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def _http(self, worker: int) -> None:
        with httpx.Client(base_url=self.http_url, timeout=30) as client:  # keeps cookies, as an SDK client does
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    response = client.post("/v1/audio/speech", json={"input": f"load {worker}", "response_format": "pcm",
                                                                      "max_new_tokens": TOKENS})
                    ok = response.status_code == 200 and len(response.content) > 0
                    detail = f"http {response.status_code} {response.headers.get('x-vocalis-replica')} {response.text[:120] if not ok else ''}"
                except httpx.HTTPError as error:
                    ok, detail = False, f"http {type(error).__name__}: {error}"
                self.outcomes.append(Outcome(started, time.monotonic(), ok, detail))

    def _grpc(self, worker: int) -> None:
        config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=TOKENS)
        with Client(self.grpc_target, timeout=30) as client:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    ok, detail = len(client.synthesize(config, f"grpc load {worker}").audio) > 0, "grpc"
                except VocalisError as error:
                    ok, detail = False, f"grpc {error.code.name}: {error.message}"
                self.outcomes.append(Outcome(started, time.monotonic(), ok, detail))

    def between(self, start: float, end: float) -> list[Outcome]:
        """Requests that started in [start, end)."""
        return [o for o in list(self.outcomes) if start <= o.started < end]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    require("postgresql", postgres_bindir() is not None)
    require("haproxy", shutil.which("haproxy") is not None or os.path.exists("/usr/sbin/haproxy"))
    root = tmp_path_factory.mktemp("rolling")
    cluster = start_cluster()
    replicas: list[RunningServer] = []
    proxy = None
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
    args = ("--family-module", "vocalis.stages.models._template.family", "--voice-store", cluster.url, "--drain-grace", "20", str(checkpoint))
    try:
        with ThreadPoolExecutor(3) as pool:
            replicas = list(pool.map(lambda _: start_server(root, *args, timeout=120), range(3)))
        proxy = start_proxy(replicas, root, check_inter=f"{int(CHECK_INTER_S * 1000)}ms", check_fall=CHECK_FALL)
        for name in ("r1", "r2", "r3"):
            proxy.wait_for(name, "UP", timeout=15)
        yield replicas, proxy, root, args
    finally:
        if proxy is not None:
            proxy.stop()
        for replica in replicas:
            if replica.alive():
                replica.process.send_signal(signal.SIGINT)  # as RunningServer.stop: no drain delay
        for replica in replicas:
            replica.stop()
        cluster.stop()


def _restart(replica: RunningServer, root, args, attempt: int) -> RunningServer:
    log_dir = root / f"restart-{attempt}"
    log_dir.mkdir(exist_ok=True)
    return start_server(log_dir, *args, timeout=120, ports=(replica.grpc_port, replica.http_port))


def test_one_cookie_keeping_client_is_spread_over_the_replicas(fleet):
    _, proxy, _, _ = fleet
    with httpx.Client(base_url=proxy.http_url, timeout=30) as client:
        served = [client.post("/v1/audio/speech", json={"input": "spread", "max_new_tokens": TOKENS, "response_format": "pcm"})
                  for _ in range(9)]
    assert all(r.status_code == 200 for r in served)
    assert not client.cookies, dict(client.cookies)  # the API sets no stickiness cookie
    assert len({r.headers["x-vocalis-replica"] for r in served}) >= 2
    # The demo page still pins a browser, so its WebSocket meets the replica that served the page.
    with httpx.Client(base_url=proxy.http_url, timeout=30) as browser:
        page = browser.get("/")
        assert page.status_code == 200 and "VOCALIS_REPLICA" in browser.cookies
        again = {browser.get("/").headers["x-vocalis-replica"] for _ in range(4)}
        assert again == {page.headers["x-vocalis-replica"]}


def test_rolling_restart_and_a_kill_under_load(fleet):
    replicas, proxy, root, args = fleet
    report: list[str] = []
    with Load(proxy.http_url, proxy.grpc_target) as load:
        time.sleep(2.0)
        warm = load.between(0, time.monotonic())
        assert warm and all(o.ok for o in warm), [o.detail for o in warm if not o.ok]

        # A rolling restart: SIGTERM, exit, start on the same ports, back in the pool; then the next one.
        for index, name in enumerate(("r1", "r2", "r3")):
            step_start = time.monotonic()
            replica = replicas[index]
            replica.process.send_signal(signal.SIGTERM)
            out_after = proxy.wait_for(name, "DOWN", timeout=15)
            assert replica.process.wait(60) == 0
            replicas[index] = _restart(replica, root, args, index)
            up_at = time.monotonic()
            rejoined_after = proxy.wait_for(name, "UP", timeout=30)
            time.sleep(1.0)
            step = load.between(step_start, time.monotonic())
            failed = [o.detail for o in step if not o.ok]
            report.append(f"SIGTERM {name}: {len(step)} requests, {len(failed)} failed, out of the pool after {out_after:.1f} s, "
                          f"back {rejoined_after:.1f} s after it answered")
            assert not failed, (name, failed)
            assert up_at > step_start

        # SIGKILL: only requests in flight at that moment may fail, and gRPC calls the proxy sent to the dead replica
        # before its checks noticed (refused streams, UNAVAILABLE: never processed, so a client may retry them;
        # HAProxy cannot, as it does not hold a gRPC call's requests, which arrive over the session's life). HTTP
        # requests sent there are retried by the proxy.
        victim = replicas[1]
        killed_at = time.monotonic()
        os.kill(victim.process.pid, signal.SIGKILL)
        out_after = proxy.wait_for("r2", "DOWN", timeout=15)
        out_at = time.monotonic()
        victim.process.wait(10)
        time.sleep(1.0)
        after_kill = load.between(killed_at, time.monotonic())
        in_flight = [o for o in load.outcomes if o.started < killed_at <= o.ended]
        failed_in_flight = [o for o in in_flight if not o.ok]
        refused = [o for o in after_kill if not o.ok and o.started < out_at and o.detail.startswith("grpc UNAVAILABLE")]
        failed_after = [o.detail for o in after_kill if not o.ok and o not in refused]
        assert not failed_after, failed_after
        assert len(failed_in_flight) <= HTTP_CLIENTS + GRPC_CLIENTS
        replicas[1] = _restart(victim, root, args, 9)
        rejoined_after = proxy.wait_for("r2", "UP", timeout=30)
        report.append(f"SIGKILL r2: {len(in_flight)} in flight, {len(failed_in_flight)} of them failed, {len(after_kill)} started "
                      f"after it, {len(refused)} gRPC calls refused before the proxy noticed; out of the pool after {out_after:.1f} s, back {rejoined_after:.1f} s "
                      "after it answered")
        time.sleep(1.0)
    total = len(load.outcomes)
    failed_total = [o for o in load.outcomes if not o.ok]
    report.append(f"total: {total} requests at concurrency {HTTP_CLIENTS + GRPC_CLIENTS}, {len(failed_total)} failed "
                  f"({', '.join(o.detail for o in failed_total) or 'none'})")
    print("\n" + "\n".join(report))
    # Whatever failed was in flight on the killed replica, or a gRPC call refused there before the proxy noticed.
    assert all(o.started < killed_at <= o.ended or o in refused for o in failed_total), [o.detail for o in failed_total]


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A replica that passes its health checks but refuses all work with 503, as one does between its drain delay
    and its exit; its gRPC port has nothing listening (a replica that is gone)."""

    def do_GET(self) -> None:  # noqa: N802
        self._answer(200 if self.path == "/ready" else 503)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._answer(503)

    def _answer(self, status: int) -> None:
        body = b'{"status": "ready"}' if status == 200 else b'{"error": {"message": "the server is shutting down"}}'
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Quiet(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        pass  # HAProxy closes its check connections as soon as it has the status line


def test_what_never_reached_a_replica_is_retried_on_another(fleet, tmp_path):
    replicas, _, _, _ = fleet
    refusing = _Quiet(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    fake = SimpleNamespace(grpc_target=f"127.0.0.1:{free_port()}", http_port=refusing.server_address[1])
    proxy = start_proxy([replicas[0], replicas[2], fake], tmp_path, check_inter="1s", check_fall=CHECK_FALL)
    try:
        proxy.wait_for("r3", "UP", timeout=15)
        # Every third request meets the refusing "replica" (HTTP: a 503 before any work) or its closed gRPC port.
        with httpx.Client(base_url=proxy.http_url, timeout=30) as client:
            answers = [client.post("/v1/audio/speech", json={"input": "retried", "max_new_tokens": TOKENS, "response_format": "pcm"})
                       for _ in range(12)]
        assert [r.status_code for r in answers] == [200] * 12, [r.text for r in answers if r.status_code != 200]
        assert {r.headers["x-vocalis-replica"] for r in answers} <= {"r1", "r2"}
        config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=TOKENS)
        with Client(proxy.grpc_target, timeout=30) as client:
            assert all(len(client.synthesize(config, "retried").audio) > 0 for _ in range(9))
    finally:
        proxy.stop()
        refusing.shutdown()
