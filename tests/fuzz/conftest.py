"""Print the fuzz seed: in the header of every run, and beside every failing fuzz test."""

from __future__ import annotations

import pytest

from tests.fuzz.seeding import reproduce_hint


def pytest_report_header() -> str:
    return reproduce_hint()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ANN001, ANN201
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("fuzz seed", reproduce_hint()))
