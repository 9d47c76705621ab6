"""Structured logs: one JSON object per line, with the request id of the session that logged it."""

from __future__ import annotations

import contextvars
import logging
import sys

from pythonjsonlogger.json import JsonFormatter

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
"""Set when a session opens; every log record made in its tasks carries it."""


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


def configure(level: str = "warning", json_lines: bool = True) -> None:
    """Quiet by default (warnings and up), JSON lines on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    if json_lines:
        handler.setFormatter(
            JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s", rename_fields={"levelname": "level"})
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
