"""A small pool of child processes that phonemize text, so that a native crash or hang fails one request, not the server.

Piper's text front end is native code (espeak-ng in `piper/espeakbridge.so`) that
segfaults on some short texts (e.g. "U.S.A." * 50: a long run of dotted initials
in one clause). In-process, that kills every session of the server. Here each
phonemization runs in a worker process (phonemizer_worker.py) over a pipe:

- a worker that dies mid-call (crash) is replaced and the text is tried once more
  on the fresh worker; a second crash means the text itself is at fault
  (TextFrontEndCrashed, naming the text); a crash that does not repeat was transient
  and the caller never sees it;
- a worker that takes longer than `timeout_s` is killed and replaced
  (TextFrontEndTimeout);
- a replacement starts at once (the child loads in the background), so the next
  request finds a worker ready or nearly so.

Workers are plain subprocesses started with the running interpreter, not
multiprocessing children, so nothing of the server (its __main__, torch) is
re-imported in them; a worker exits when its pipe closes, so none outlives the server.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from vocalis.stages.api.errors import SynthesisFailed

log = logging.getLogger(__name__)

WORKER_SCRIPT = Path(__file__).with_name("phonemizer_worker.py")
DEFAULT_TIMEOUT_S = 10.0
"""Longest one phonemization may take (a unit of a few hundred characters takes milliseconds)."""
STARTUP_TIMEOUT_S = 60.0
"""Longest a fresh worker may take to load espeak-ng (seconds on a busy machine)."""


class TextFrontEndCrashed(SynthesisFailed):
    """The native text front end crashed twice on the same text: the text is what makes it fail."""


class TextFrontEndTimeout(SynthesisFailed):
    """The native text front end took longer than the pool's timeout on a text."""


class TextFrontEndError(SynthesisFailed):
    """The text front end refused a text with a Python exception (the worker lives on)."""


def excerpt(text: str, limit: int = 40) -> str:
    """The start of `text`, quoted, for error messages."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


class _Worker:
    """One child process and its two pipe ends."""

    def __init__(self, argv: Sequence[str]) -> None:
        parent_read, child_write = os.pipe()
        child_read, parent_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [*argv, str(child_read), str(child_write)],
                pass_fds=(child_read, child_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        finally:
            os.close(child_read)
            os.close(child_write)
        self.inbox = Connection(parent_read, writable=False)
        self.outbox = Connection(parent_write, readable=False)
        self.ready = False

    def call(self, text: str | list[str], timeout_s: float) -> tuple[str, object]:
        """Send `text`, wait for the answer; EOFError/OSError if the worker died, TimeoutError if it hangs."""
        if not self.ready:
            self._await_ready()
        self.outbox.send(text)
        if not self.inbox.poll(timeout_s):
            raise TimeoutError
        return self.inbox.recv()

    def _await_ready(self) -> None:
        if not self.inbox.poll(STARTUP_TIMEOUT_S):
            raise TimeoutError
        kind, _ = self.inbox.recv()
        if kind != "ready":
            raise EOFError(f"phonemizer worker said {kind!r} instead of ready")
        self.ready = True

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.inbox.close()
        self.outbox.close()


class PhonemizerPool:
    """`size` phonemizer processes; phonemize() is thread-safe and waits for a free worker."""

    def __init__(
        self,
        config_path: Path,
        size: int = 1,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        worker_argv: Sequence[str] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a phonemizer pool needs at least one worker")
        self.argv = list(worker_argv or [sys.executable, str(WORKER_SCRIPT), str(config_path)])
        self.size = size
        self.timeout_s = timeout_s
        self.restarts = 0
        """Workers replaced after a crash or a hang since the pool started."""
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers: set[_Worker] = set()
        self._closed = False
        for _ in range(size):
            self._idle.put(self._start())

    def phonemize(self, text: str) -> list[list[str]]:
        """Phonemes of `text` by sentence, as PiperVoice.phonemize gives them, computed in a worker process."""
        return self._ask(text)  # type: ignore[return-value]

    def phonemize_words(self, words: list[str]) -> list[list[str]]:
        """The phonemes of each word said on its own (all its sentences joined), in one call to a worker."""
        return self._ask(words) if words else []  # type: ignore[return-value]

    def _ask(self, payload: str | list[str]) -> object:
        text = payload if isinstance(payload, str) else " ".join(payload)
        worker = self._idle.get()
        try:
            for attempt in (1, 2):
                try:
                    kind, value = worker.call(payload, self.timeout_s)
                except TimeoutError:
                    worker = self._replace(worker, f"took longer than {self.timeout_s:g} s on {excerpt(text)}")
                    raise TextFrontEndTimeout(
                        f"the text front end (espeak-ng) took longer than {self.timeout_s:g} s on {excerpt(text)}"
                    ) from None
                except (EOFError, OSError):
                    worker = self._replace(worker, f"crashed on {excerpt(text)} (attempt {attempt})")
                    continue
                if kind == "ok":
                    return value
                raise TextFrontEndError(f"the text front end refused {excerpt(text)}: {value}")
            raise TextFrontEndCrashed(
                f"the text front end (espeak-ng) crashes on the text {excerpt(text)}; rephrase it"
                " (for example, spaces between dotted initials: 'U. S. A.')"
            )
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._workers = list(self._workers), set()
        for worker in workers:
            worker.close()

    def _start(self) -> _Worker:
        worker = _Worker(self.argv)
        with self._lock:
            self._workers.add(worker)
        return worker

    def _replace(self, worker: _Worker, why: str) -> _Worker:
        code = worker.process.poll()
        log.warning("phonemizer worker %d %s (exit code %s); starting a new one", worker.process.pid, why, code)
        with self._lock:
            self._workers.discard(worker)
            self.restarts += 1
        worker.close()
        return self._start()
