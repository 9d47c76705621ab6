"""A short memory of a database outage, so that calls fail at once instead of each waiting out the pool.

While the database is away, every call would wait the pool's whole timeout before failing. After one call has
failed, the calls of the next `hold_s` seconds fail at once; past it, the next call tries the database again (and
the pool, whose reconnect attempts are kept short, has usually reconnected by then). So an outage costs each
caller at most one timeout, most callers none, and the store is used again within about `hold_s` of its return.
"""

from __future__ import annotations

import threading
import time


class Outage:
    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    def recent(self) -> bool:
        """A call failed within the last `hold_s` seconds: do not wait on the database now."""
        with self._lock:
            return self._failed_at is not None and time.monotonic() - self._failed_at < self.hold_s

    def failed(self) -> bool:
        """Remember a failure; True when it starts an outage (the one to log)."""
        with self._lock:
            starts = self._failed_at is None
            self._failed_at = time.monotonic()
            return starts

    def succeeded(self) -> bool:
        """Forget the outage; True when there was one (its end is worth a log line)."""
        with self._lock:
            ended = self._failed_at is not None
            self._failed_at = None
            return ended
