"""A throw-away PostgreSQL cluster for a test: initdb into a temp dir, pg_ctl start on a free loopback port, stop.

PostgreSQL refuses to run as root; when the tests do, the cluster runs as the `postgres` user that Debian's
package creates (or `nobody`), owning its temp dir. The server binaries come from PATH, else Debian's
/usr/lib/postgresql/<version>/bin.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.serving import free_port

IN_CI = os.environ.get("VOCALIS_CI") == "1" or os.environ.get("CI", "").lower() in ("1", "true")


def require(tool: str, found: bool) -> None:
    """Skip the calling test when `tool` is missing, except in CI (.ci/run installs it), where that fails."""
    if not found:
        import pytest

        message = f"{tool} is not installed (apt-get install {tool}; .ci/run does)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def postgres_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name), reverse=True)
    return versions[0].parent if versions else None


def runuser() -> str:
    """util-linux's runuser: in /usr/sbin, which a minimal PATH (CI's `env -i`) leaves out."""
    for candidate in (shutil.which("runuser"), "/usr/sbin/runuser", "/sbin/runuser"):
        if candidate and Path(candidate).exists():
            return candidate
    raise FileNotFoundError("runuser (util-linux) is needed to run PostgreSQL as a non-root user under root")


@dataclass
class Cluster:
    directory: Path
    port: int
    bindir: Path
    user: str | None

    @property
    def url(self) -> str:
        return f"postgresql://vocalis@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.user:
            command = [runuser(), "-u", self.user, "--", *command]
        subprocess.run(command, check=True, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    options: str = ""

    def halt(self) -> None:
        """Stop the server (its clients cut off at once), keeping its data for `resume`. Fast, not immediate: with
        synchronous_commit off, an immediate stop may lose the last commits."""
        self._run("pg_ctl", "stop", "-D", str(self.directory / "data"), "-m", "fast", timeout=30)

    def resume(self) -> None:
        """Start it again on the same port, with the same data."""
        data = self.directory / "data"
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(data), "-l", str(self.directory / "log"), "-o", self.options, timeout=90)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "stop", "-D", str(self.directory / "data"), "-m", "immediate", timeout=30)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_cluster() -> Cluster:
    """initdb + pg_ctl start (trust auth for user `vocalis` on 127.0.0.1 only, fsync off: a test's data)."""
    bindir = postgres_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL's server binaries (pg_ctl, initdb) are not installed: apt-get install postgresql")
    user = None
    if os.geteuid() == 0:
        user = next((name for name in ("postgres", "nobody") if _user_exists(name)), None)
    directory = Path(tempfile.mkdtemp(prefix="vocalis-pg-"))
    directory.chmod(0o755)
    if user:
        entry = pwd.getpwnam(user)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    port = free_port()
    options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    cluster = Cluster(directory, port, bindir, user, options)
    data = directory / "data"
    cluster._run("initdb", "-D", str(data), "-U", "vocalis", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
    try:
        cluster.resume()
    except subprocess.CalledProcessError as error:
        log = (directory / "log").read_text() if (directory / "log").exists() else ""
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"postgres did not start: {error.stdout!r} {log}") from error
    return cluster


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
