"""Shared fixtures: one real server on loopback for the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serving import RunningServer, start_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("server"))
    yield running
    running.stop()
