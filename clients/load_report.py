"""What `vocalis bench` writes: a markdown table, a JSON report, and a PNG of the sweep."""

from __future__ import annotations

import json
from pathlib import Path

COLUMNS = (
    "mode",
    "load",
    "requests",
    "errors",
    "TTFA p50 / p95 / p99 (ms)",
    "E2E p50 / p95 / p99 (s)",
    "RTF p50",
    "audio s / wall s",
    "req/s",
    "underruns",
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _load(summary: dict) -> str:
    return f"c={summary['load']:g}" if summary["mode"] == "closed" else f"{summary['load']:g} req/s"


def _errors(summary: dict) -> str:
    errors = summary["errors"]
    return ", ".join(f"{status} x{count}" for status, count in errors.items()) if errors else "0"


def markdown_table(summaries: list[dict]) -> str:
    """One row per load level."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for s in summaries:
        ttfa, latency = s["ttfa_s"], s["latency_s"]
        row = (
            s["mode"],
            _load(s),
            str(s["requests"]),
            _errors(s),
            " / ".join(_ms(ttfa[k]) for k in ("p50", "p95", "p99")),
            " / ".join(_s(latency[k]) for k in ("p50", "p95", "p99")),
            "-" if s["rtf"]["p50"] is None else f"{s['rtf']['p50']:.3f}",
            f"{s['audio_s_per_s']:.1f}",
            f"{s['requests_per_s']:.2f}",
            f"{s['underruns']} in {s['requests_with_underruns']} req",
        )
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def write_json(path: Path, report: dict) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n")


def plot(path: Path, summaries: list[dict], title: str = "vocalis bench") -> None:
    """Throughput, TTFA and latency against load, one column per mode (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    modes = [m for m in ("closed", "open") if any(s["mode"] == m for s in summaries)]
    figure, axes = plt.subplots(3, len(modes), figsize=(5.5 * len(modes), 9), squeeze=False)
    for column, mode in enumerate(modes):
        rows = sorted((s for s in summaries if s["mode"] == mode), key=lambda s: s["load"])
        x = [s["load"] for s in rows]
        label = "concurrency" if mode == "closed" else "arrival rate (req/s)"
        throughput, ttfa, latency = axes[0][column], axes[1][column], axes[2][column]
        throughput.plot(x, [s["audio_s_per_s"] for s in rows], "o-")
        throughput.set_ylabel("audio s per wall s")
        throughput.set_title(f"{title}: {'closed' if mode == 'closed' else 'open'} loop")
        for key, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ttfa.plot(x, [_or_nan(s["ttfa_s"][key], 1000) for s in rows], style, label=key)
            latency.plot(x, [_or_nan(s["latency_s"][key]) for s in rows], style, label=key)
        ttfa.set_ylabel("time to first audio (ms)")
        latency.set_ylabel("end-to-end latency (s)")
        latency.set_xlabel(label)
        for axis in (throughput, ttfa, latency):
            axis.grid(True, alpha=0.3)
            if mode == "closed" and len(x) > 1 and min(x) > 0:
                axis.set_xscale("log", base=2)
                axis.set_xticks(x, [f"{v:g}" for v in x])
        ttfa.legend()
        latency.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _or_nan(value: float | None, scale: float = 1.0) -> float:
    return float("nan") if value is None else value * scale
