"""A process's memory figures from /proc/<pid>/status (Linux), in kiB: what the memory benches read."""

from __future__ import annotations

from pathlib import Path


def status_fields(pid: int | str = "self") -> dict[str, int]:
    """Every kiB-valued field of the process's status (VmRSS, VmHWM, ...), read in one go so that they agree."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            fields[key] = int(parts[0])
    return fields


def status_kib(pid: int | str, field: str, default: int | None = None) -> int:
    """One field of the process's status in kiB; `default` when it has none (else KeyError)."""
    fields = status_fields(pid)
    if field in fields:
        return fields[field]
    if default is None:
        raise KeyError(field)
    return default
