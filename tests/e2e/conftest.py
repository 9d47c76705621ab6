"""The shared family servers of tests/e2e/family_servers.py: one session-wide registry, the conformance rows of a
family moved right before its own file, and each server stopped after the last test that needs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.family_servers import CONFORMANCE, HOME_FILES, FamilyServers

_REGISTRY = pytest.StashKey[FamilyServers]()


@pytest.fixture(scope="session")
def family_servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FamilyServers]:
    registry = FamilyServers(tmp_path_factory)
    request.config.stash[_REGISTRY] = registry
    yield registry
    registry.stop_all()


def _families(item: pytest.Item) -> set[str]:
    """The shared servers `item` may use."""
    name = Path(str(item.path)).name
    if name == CONFORMANCE and hasattr(item, "callspec"):
        family = item.callspec.params["family"]
        return {family, *next((group for group in HOME_FILES.values() if family in group), ())}
    return set(HOME_FILES.get(name, ()))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each family's conformance rows right before the first test of its own file (the order is otherwise kept)."""
    first_of_home: dict[str, int] = {}
    for index, item in enumerate(items):
        name = Path(str(item.path)).name
        for family in HOME_FILES.get(name, ()):
            first_of_home.setdefault(family, index)

    def anchor(pair: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = pair
        if Path(str(item.path)).name == CONFORMANCE and hasattr(item, "callspec"):
            return first_of_home.get(item.callspec.params["family"], index), 0
        return index, 1

    items[:] = [item for _, item in sorted(enumerate(items), key=anchor)]


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    registry = item.config.stash.get(_REGISTRY, None)
    if registry is not None:
        registry.keep_only(_families(nextitem) if nextitem is not None else set())
