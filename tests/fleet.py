"""Replicas behind HAProxy, for the scale-out test and bench: deploy/haproxy/haproxy.cfg run unchanged.

The config lists three replicas; with fewer, the spare server lines point at the last replica (the bench's
1- and 2-replica rows), so the proxy's own policy stays exactly the shipped one.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf

from tests.serving import ROOT, RunningServer, free_port

CONFIG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
SLOTS = 3
_STATUS = re.compile(r'^haproxy_server_status\{([^}]*)\}\s+(\S+)$', re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def voice_clip(seed: int, seconds: float = 1.5, rate: int = 16000) -> bytes:
    """A WAV an upload accepts as a speaker's clip, different for every `seed`."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t + rng.uniform(0, 6))
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * envelope * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate, format="WAV")
    return buffer.getvalue()


@dataclass
class Proxy:
    process: subprocess.Popen
    grpc_port: int
    http_port: int
    stats_port: int
    log_path: Path

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.stats_port}/metrics"

    def server_states(self, backend: str = "vocalis_grpc") -> dict[str, str]:
        """Each replica's state in `backend` as the exporter reports it ("UP", "DOWN", "NOLB", ...)."""
        return server_states(httpx.get(self.metrics_url, timeout=5).text, backend)

    def wait_for(self, server: str, state: str, timeout: float, backends: Sequence[str] = ("vocalis_grpc", "vocalis_http")) -> float:
        """Seconds until `server` is in `state` in every one of `backends`; TimeoutError past `timeout`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if all(self.server_states(backend).get(server) == state for backend in backends):
                return time.monotonic() - start
            time.sleep(0.05)
        raise TimeoutError(f"{server} not {state} after {timeout} s: {[self.server_states(b) for b in backends]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def server_states(exposition: str, backend: str) -> dict[str, str]:
    states: dict[str, str] = {}
    for labels_text, value in _STATUS.findall(exposition):
        labels = dict(_LABEL.findall(labels_text))
        if labels.get("proxy") != backend or float(value) != 1:
            continue
        states[labels["server"]] = labels.get("state", "UP")
    return states


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise FileNotFoundError("haproxy is not installed: apt-get install haproxy")
    return found


def start_proxy(
    replicas: Sequence[RunningServer], log_dir: Path, check_inter: str = "1s", check_fall: int = 2, extra_configs: Sequence[Path] = ()
) -> Proxy:
    """HAProxy with the shipped config in front of `replicas` (1 to 3), on free loopback ports; waits until it answers.
    `extra_configs`: more files after the shipped one (backends of other model pools)."""
    if not 1 <= len(replicas) <= SLOTS:
        raise ValueError(f"the shipped config has {SLOTS} replica slots")
    grpc_port, http_port, stats_port = free_port(), free_port(), free_port()
    env = {
        "VOCALIS_GRPC_BIND": f"127.0.0.1:{grpc_port}",
        "VOCALIS_HTTP_BIND": f"127.0.0.1:{http_port}",
        "VOCALIS_STATS_BIND": f"127.0.0.1:{stats_port}",
        "VOCALIS_CHECK_INTER": check_inter,
        "VOCALIS_CHECK_FALL": str(check_fall),
    }
    for slot in range(SLOTS):
        replica = replicas[min(slot, len(replicas) - 1)]
        env[f"VOCALIS_R{slot + 1}_GRPC"] = replica.grpc_target
        env[f"VOCALIS_R{slot + 1}_HTTP"] = f"127.0.0.1:{replica.http_port}"
        env[f"VOCALIS_R{slot + 1}_HTTP_PORT"] = str(replica.http_port)
    log_path = log_dir / f"haproxy-{grpc_port}.log"
    process = subprocess.Popen(
        [haproxy_binary(), "-db", "-f", str(CONFIG), *(arg for path in extra_configs for arg in ("-f", str(path)))], env={**os.environ, **env}, stdout=log_path.open("wb"), stderr=subprocess.STDOUT
    )
    proxy = Proxy(process, grpc_port, http_port, stats_port, log_path)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"haproxy exited: {log_path.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{stats_port}/healthz", timeout=1).status_code == 200:
                return proxy
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proxy.stop()
    raise RuntimeError(f"haproxy did not answer: {log_path.read_text()}")


NGINX_TEMPLATE = ROOT / "deploy" / "nginx" / "vocalis.conf.template"


@dataclass
class Nginx:
    process: subprocess.Popen
    grpc_port: int
    http_port: int
    run_dir: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_nginx(replicas: Sequence[RunningServer], log_dir: Path) -> Nginx:
    """nginx with deploy/nginx/vocalis.conf.template (filled in as envsubst would) in front of three replicas."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    grpc_port, http_port = free_port(), free_port()
    run_dir = log_dir / f"nginx-{grpc_port}"
    run_dir.mkdir()
    values = {"VOCALIS_NGINX_RUN": str(run_dir), "VOCALIS_GRPC_BIND": f"127.0.0.1:{grpc_port}", "VOCALIS_HTTP_BIND": f"127.0.0.1:{http_port}"}
    for slot in range(SLOTS):
        replica = replicas[min(slot, len(replicas) - 1)]
        values[f"VOCALIS_R{slot + 1}_GRPC"] = replica.grpc_target
        values[f"VOCALIS_R{slot + 1}_HTTP"] = f"127.0.0.1:{replica.http_port}"
    config = run_dir / "nginx.conf"
    # As `envsubst '$VOCALIS_...'` would: only our variables, never nginx's own ($http_upgrade, ...).
    config.write_text(re.sub(r"\$\{(VOCALIS_\w+)\}", lambda m: values[m.group(1)], NGINX_TEMPLATE.read_text()))
    extra = "daemon off; user root;" if os.geteuid() == 0 else "daemon off;"  # root: workers too, to write the run dir
    process = subprocess.Popen(
        [binary, "-p", str(run_dir), "-c", str(config), "-g", extra], stdout=(run_dir / "stdout.log").open("wb"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited: {(run_dir / 'stdout.log').read_text()} {(run_dir / 'error.log').read_text()}")
        try:
            httpx.get(f"http://127.0.0.1:{http_port}/live", timeout=1)
            return Nginx(process, grpc_port, http_port, run_dir)
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("nginx did not answer")
