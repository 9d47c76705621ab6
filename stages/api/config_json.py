"""Configuration dataclasses from the JSON a checkpoint's publisher wrote (config.json and its nested sections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def from_json(cls: type[T], data: Mapping[str, Any] | None, **sections: Any) -> T:
    """The dataclass `cls` from one JSON object: the keys it declares (a JSON list becomes a tuple where the field is
    declared a tuple), unknown keys ignored, missing ones at the declared defaults. `sections` (nested objects the
    caller has already built, or values it derives) win over the JSON."""
    data = data or {}
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            value = data[f.name]
            if isinstance(value, list) and str(f.type).startswith("tuple"):
                value = tuple(value)
            values[f.name] = value
    return cls(**(values | sections))
