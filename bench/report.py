"""What every bench does last: its result as indented JSON at the path it was given, and a line that says where; and
how a bench shows a figure repeated over runs or pairs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any


def write_json(path: Path, result: Any, indent: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=indent))
    print(f"wrote {path}")


def spread(values: list[float], digits: int = 2) -> str:
    """median [min–max], each with `digits` decimals"""
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"
