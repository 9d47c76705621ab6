"""Run a Python module with every onnxruntime `InferenceSession.run` timed, for a bench to tell a server's model time
from the rest of its latency:

    python bench/onnx_run_timer.py LOG -m MODULE [ARGS...]

Each run appends one line `<start> <end>` (time.monotonic(), seconds) to LOG. The same wrapper goes around both servers
of bench/piper_side_by_side.py, so what it reports for one compares with the other. The timing is two clock reads
and a short write per run: microseconds against runs of tens of milliseconds.
"""

from __future__ import annotations

import runpy
import sys
import threading
import time
from pathlib import Path

USAGE = "usage: python bench/onnx_run_timer.py LOG -m MODULE [ARGS...]"


def time_runs(log_path: Path) -> None:
    """Patch `onnxruntime.InferenceSession.run` to append each run's start and end to `log_path`."""
    import onnxruntime

    untimed = onnxruntime.InferenceSession.run
    log = log_path.open("a", buffering=1)
    lock = threading.Lock()

    def run(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - the wrapped method's own signature
        start = time.monotonic()
        try:
            return untimed(self, *args, **kwargs)
        finally:
            end = time.monotonic()
            with lock:
                log.write(f"{start:.6f} {end:.6f}\n")

    onnxruntime.InferenceSession.run = run


def seconds_between(log_path: Path, start: float, end: float) -> float:
    """Seconds of the runs logged in `log_path` that started within [start, end] (time.monotonic())."""
    total = 0.0
    for line in log_path.read_text().splitlines():
        began, ended = (float(v) for v in line.split())
        if start <= began <= end:
            total += ended - began
    return total


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "-m":
        sys.exit(USAGE)
    time_runs(Path(argv[0]))
    module = argv[2]
    sys.argv = [module, *argv[3:]]
    sys.path[0] = ""  # as `python -m MODULE` has it: the working folder, not bench/
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
