"""Start a real `vocalis serve` process on loopback for end-to-end tests."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: the server runs there, so that a `--family-module` from the tests imports."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RunningServer:
    process: subprocess.Popen
    grpc_port: int
    http_port: int
    log_path: Path

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        # SIGINT, as at a terminal: SIGTERM would first hold the server for the proxies' drain delay (about 4 s),
        # which only the drain tests want, and they send SIGTERM themselves.
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def metric(server: RunningServer, name: str) -> dict[str, float]:
    """Every sample of metric `name` in the server's exposition (GET /metrics), by its label text."""
    text = httpx.get(f"{server.http_url}/metrics", timeout=30).text
    return {labels: float(value) for labels, value in re.findall(rf"^{name}(\{{[^}}]*\}})?\s+(\S+)$", text, re.MULTILINE)}


def start_server(
    log_dir: Path,
    *args: str,
    timeout: float = 180.0,
    tls_root: bytes | None = None,
    health_metadata: tuple[tuple[str, str], ...] = (),
    env: dict[str, str] | None = None,
    ports: tuple[int, int] | None = None,
    launcher: tuple[str, ...] = (),
) -> RunningServer:
    """Start `vocalis serve` with `args`; `health_metadata` (a key) when its health checks need one (--closed-health);
    `env`: variables set for the server beside the test's own (HF_HOME, HF_HUB_OFFLINE, ...); `ports`: (gRPC, HTTP)
    to listen on, e.g. a replica's own again after a restart (default: free ones); `launcher`: a script and its
    arguments that run the server's module for it (`python SCRIPT ARGS -m vocalis.server ...`)."""
    grpc_port, http_port = ports or (free_port(), free_port())
    log_path = log_dir / f"server-{grpc_port}.log"
    command = [
        sys.executable, *launcher, "-m", "vocalis.server", "serve",
        "--grpc-address", f"127.0.0.1:{grpc_port}", "--host", "127.0.0.1", "--port", str(http_port),
        *(() if "--voice-dir" in args or "--voice-store" in args else ("--voice-dir", str(log_dir / f"voices-{grpc_port}"))), *args,
    ]
    log = log_path.open("wb")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    )
    server = RunningServer(process, grpc_port, http_port, log_path)
    deadline = time.monotonic() + timeout
    channel = (
        grpc.secure_channel(server.grpc_target, grpc.ssl_channel_credentials(tls_root))
        if tls_root
        else grpc.insecure_channel(server.grpc_target)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if not server.alive():
                raise RuntimeError(f"server exited: {log_path.read_text()}")
            try:
                if stub.Check(health_pb2.HealthCheckRequest(), timeout=1, metadata=health_metadata).status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        else:
            server.stop()
            raise RuntimeError(f"server did not become ready: {log_path.read_text()}")
    _wait_http(http_port, deadline)
    return server


def _wait_http(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"gateway port {port} never opened")


def start_gateway(log_path: Path, *upstreams: str, timeout: float = 30.0) -> tuple[subprocess.Popen, str]:
    """Start `vocalis gateway` alone with `--upstream` each of `upstreams` ("MODEL=ADDR,ADDR"); its process and base
    URL once its /ready answers 200 (or the timeout passes: the test then sees what it says)."""
    port = free_port()
    args = [a for upstream in upstreams for a in ("--upstream", upstream)]
    process = subprocess.Popen(
        [sys.executable, "-m", "vocalis.server", "gateway", "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=log_path.open("wb"), stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    return process, url
