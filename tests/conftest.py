"""Shared fixtures (one real server on loopback for the end-to-end tests) and the test markers.

Markers come from where a test lives, so that no test file names its own: tests/e2e, tests/fuzz and tests/soak, and
any other test that starts a real server (the `server` fixture, `start_server`), are `e2e`; tests/stages/models, and
any other module that reads the golden checkpoints of tests/goldens (or tests/tiny_checkpoints.py's), is `golden`; everything else is `unit`. `slow` marks the few tests that take over ~20 s on 2 cores (SLOW, measured with --durations). CI runs
`-m unit` first (.ci/run), then the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path, PurePosixPath

# Before torch loads anywhere (this process, xdist's workers, the servers the tests start): the suite runs two workers
# and their servers on two cores, where an OpenMP team that spins between parallel regions takes a core from another
# process. Sleeping teams ran the unit half in 71-73 s against 92-100 s (2 runs each, interleaved). A server keeps
# libgomp's default; stages/runtime/openmp_teams.py says why.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from tests.e2e.family_servers import CONFORMANCE, HOME_FILES, home_file
from tests.serving import ROOT, RunningServer, start_server

TESTS = ROOT / "tests"

SLOW: frozenset[str] = frozenset({
    "tests/fuzz/test_corpus.py::test_attack_texts_fail_alone_on_every_face",  # 30 to 105 s a text, measured loaded
    "tests/soak/test_soak_short.py::test_soak_one_minute",  # a minute by design
    "tests/fuzz/test_fuzz_gateway.py::test_no_server_errors",
    "tests/e2e/test_rolling_restart.py::test_rolling_restart_and_a_kill_under_load",  # ~65 s: three restarts under load
    "tests/e2e/test_crash_containment.py::test_crashing_texts_fail_alone_while_other_sessions_finish",
    "tests/stages/models/omnivoice/test_omnivoice_model.py::test_every_tensor_matters",
})
"""Node ids (without parameters) of the tests over ~20 s on 2 cores (--durations of a full run)."""


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("server"), "--log-level", "info")  # info: the warm-up is logged
    yield running
    running.stop()


END_TO_END_DIRS = ("e2e", "fuzz", "soak")
GOLDEN_SOURCES = ("tests.goldens", "tests/goldens", "tiny_checkpoints")
"""How a module that reads the golden checkpoints names them: the folder, or the module that finds or builds them."""


@cache
def _source(module: Path) -> str:
    return module.read_text(encoding="utf-8", errors="replace")


def kind(item: pytest.Item) -> str:
    """The marker of a collected test: e2e, golden or unit."""
    path = Path(str(item.path))
    parts = path.resolve().relative_to(TESTS).parts
    if parts[0] in END_TO_END_DIRS or "server" in getattr(item, "fixturenames", ()) or "start_server(" in _source(path):
        return "e2e"
    if parts[:2] == ("stages", "models") or any(name in _source(path) for name in GOLDEN_SOURCES):
        return "golden"
    return "unit"


def worker_group(nodeid: str) -> str:
    """The tests that must run in one pytest-xdist worker, because they share what is costly to start: a family's
    e2e file and its conformance rows (one family server), a family's golden tests (its session-built checkpoint),
    otherwise the tests of one file (its module-scoped servers). From the node id alone: xdist's scheduler, in the
    controller, sees no more than that."""
    path = PurePosixPath(nodeid.split("::", 1)[0])
    if path.name == CONFORMANCE and nodeid.endswith("]"):
        family = nodeid[nodeid.rindex("[") + 1:-1]
        return f"home:{home_file(family) or family}"
    if path.name in HOME_FILES:
        return f"home:{path.name}"
    if path.parts[:3] == ("tests", "stages", "models") and len(path.parts) > 4:
        return f"golden:{path.parts[3]}"
    return str(path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Whole groups (worker_group) to a worker: xdist's own --dist loadgroup does not group under pytest 9 (it
    renames `item._nodeid`, which pytest 9 no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    # Hand the groups out in the collection's order (pytest_collection_modifyitems: long groups first). xdist's default
    # reorders them by test count, which put the one-test soak (150 s) last, alone.
    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(kind(item))
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker("slow")
    # Long groups first, short ones last: a worker that starts a long group last finishes alone, the other one idle.
    # First the groups with a slow test, then the family groups (a server or a built checkpoint, and many tests),
    # then the single files, most of them seconds.
    groups_with_slow = {worker_group(item.nodeid) for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        group = worker_group(item.nodeid)
        return 0 if group in groups_with_slow else 1 if group.startswith(("home:", "golden:")) else 2

    items[:] = sorted(items, key=rank)
