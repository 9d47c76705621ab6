"""Shared fixtures (one real server on loopback for the end-to-end tests) and the test markers.

Markers come from where a test lives, so that no test file names its own: tests/e2e is `e2e` (real servers);
tests/stages/models, and any other module that reads the golden checkpoints of tests/goldens, is `golden`; everything
else is `unit`. `slow` marks the few tests that take over ~20 s on 2 cores (SLOW, measured with --durations). CI runs
`-m unit` first (.ci/run), then the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.serving import ROOT, RunningServer, start_server

TESTS = ROOT / "tests"

SLOW: frozenset[str] = frozenset({
    "tests/fuzz/test_corpus.py::test_attack_texts_fail_alone_on_every_face",  # 30 to 105 s a text, measured loaded
    "tests/soak/test_soak_short.py::test_soak_one_minute",  # a minute by design
    "tests/fuzz/test_fuzz_gateway.py::test_no_server_errors",
})
"""Node ids (without parameters) of the tests over ~20 s on 2 cores (--durations of a full run)."""


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("server"))
    yield running
    running.stop()


@cache
def _reads_goldens(module: Path) -> bool:
    source = module.read_text(encoding="utf-8", errors="replace")
    return "tests.goldens" in source or "tests/goldens" in source


def kind(path: Path) -> str:
    """The marker of a test module at `path`: e2e, golden or unit."""
    parts = path.resolve().relative_to(TESTS).parts
    if parts[0] == "e2e":
        return "e2e"
    if parts[:2] == ("stages", "models") or _reads_goldens(path):
        return "golden"
    return "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        item.add_marker(kind(path))
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker("slow")
