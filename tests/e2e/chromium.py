"""Headless Chromium driven over the DevTools protocol on a pipe: no driver, no extra package.

Chromium started with --remote-debugging-pipe reads protocol commands on fd 3 and
writes replies and events on fd 4, each a JSON text ended by a NUL byte.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--autoplay-policy=no-user-gesture-required",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    def __init__(self, executable: str, profile: Path, log: Path) -> None:
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{commands_read} 4>&{replies_write}', executable, *FLAGS,
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(commands_read, replies_write),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._next_id = 0
        self._results: dict[int, dict] = {}
        self._ready = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session = ""

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._replies, 65536):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._ready:
                        self._results[message["id"]] = message
                        self._ready.notify_all()

    def send(self, method: str, params: dict | None = None, *, session: str | None = None, timeout: float = 30) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        session = self.session if session is None else session
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._ready:
            while self._next_id not in self._results:
                if not self._ready.wait(deadline - time.monotonic()) and time.monotonic() >= deadline:
                    raise TimeoutError(f"no reply to {method} within {timeout} s")
            reply = self._results.pop(self._next_id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def open(self, url: str) -> None:
        """A new page at `url`; later commands go to it."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session="")["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session="")["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str, *, user_gesture: bool = False, timeout: float = 30) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True, "userGesture": user_gesture},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression} stayed false for {timeout} s")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", session="", timeout=5)
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        self._log.close()
