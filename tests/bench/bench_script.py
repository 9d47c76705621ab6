"""A bench/ script loaded as a module, so that a test can call its main() the way the command line does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py, imported under the name bench_<name>."""
    module_name = f"bench_{name}"
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "bench" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench
