"""What `vocalis bench` writes: the markdown table and the plot."""

from __future__ import annotations

import pytest

from vocalis.clients.load_report import markdown_table, plot
from vocalis.clients.load_test import LevelResult, RequestResult


def summaries() -> list[dict]:
    levels = []
    for mode, load in (("closed", 1), ("closed", 4), ("open", 2.5)):
        results = [RequestResult("short", 5, latency_s=0.4 * load, ttfa_s=0.05 * load, audio_s=2.0, sample_rate=22050)]
        if load == 4:
            results.append(RequestResult("short", 5, latency_s=0.1, status="HTTP 429"))
        levels.append(LevelResult(mode, load, wall_s=1.0, results=results).summary())
    return levels


def test_markdown_table_has_a_row_per_level():
    lines = markdown_table(summaries()).splitlines()
    assert lines[0].startswith("| mode | load | requests | errors | TTFA p50 / p95 / p99 (ms)")
    assert len(lines) == 2 + 3
    assert lines[2].startswith("| closed | c=1 | 1 | 0 | 50 / 50 / 50 | 0.40 / 0.40 / 0.40 | 0.200 | 2.0 |")
    assert "| c=4 | 2 | HTTP 429 x1 |" in lines[3]
    assert lines[4].startswith("| open | 2.5 req/s |")


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "sweep.png"
    plot(path, summaries())
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
