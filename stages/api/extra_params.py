"""Declarative `extra_params`: each family lists the keys it honours, and one validator checks them all.

A key's type, range and description are data, so the validation message, Capabilities and
Models.GetModel (`ModelCapabilities.extra_param_specs`) all come from the same declaration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vocalis.stages.api.errors import InvalidField

TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
"""Python type of a value -> its JSON type name, as GetModel reports it."""


@dataclass(frozen=True)
class ExtraParam:
    """One key of `extra_params`."""

    name: str
    kind: type
    """bool, int, float, str or list (a JSON array, checked by the family)."""
    description: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    """The minimum itself is refused (a range such as (0, 1])."""
    target: str | None = None
    """The setting it sets, when not its own name (an alias)."""
    choices: tuple[str, ...] = ()
    """The accepted values of a string key (empty: any string)."""

    def __post_init__(self) -> None:
        if self.kind not in TYPES:
            raise TypeError(f"extra param {self.name}: kind must be one of {', '.join(t.__name__ for t in TYPES)}")

    @property
    def type_name(self) -> str:
        return TYPES[self.kind]

    @property
    def setting(self) -> str:
        return self.target or self.name

    def range_text(self) -> str:
        """The accepted range in words ("" when any value of the type is)."""
        if self.minimum is not None and self.maximum is not None and not self.exclusive_minimum:
            return f"from {self.minimum:g} to {self.maximum:g}"
        parts = []
        if self.minimum is not None:
            parts.append(f"{'above' if self.exclusive_minimum else 'at least'} {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"at most {self.maximum:g}")
        return " and ".join(parts)

    def parse(self, value: Any) -> Any:
        """The typed value, or an InvalidField naming `extra_params.<name>` and what it must be."""
        field = f"extra_params.{self.name}"
        if self.kind is bool:
            if not isinstance(value, bool):
                raise InvalidField(field, "INVALID_VALUE", f"{field} must be true or false")
            return value
        if self.kind is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                wanted = f"one of {', '.join(self.choices)}" if self.choices else "a string"
                raise InvalidField(field, "INVALID_VALUE", f"{field} must be {wanted}")
            return value
        if self.kind is list:
            if not isinstance(value, list):
                raise InvalidField(field, "INVALID_VALUE", f"{field} must be a list")
            return list(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidField(field, "INVALID_VALUE", f"{field} must be {'an integer' if self.kind is int else 'a number'}")
        if self.kind is int and int(value) != value:
            raise InvalidField(field, "INVALID_VALUE", f"{field} must be an integer")
        typed = int(value) if self.kind is int else float(value)
        below = self.minimum is not None and (typed <= self.minimum if self.exclusive_minimum else typed < self.minimum)
        above = self.maximum is not None and typed > self.maximum
        if below or above:
            raise InvalidField(field, "OUT_OF_RANGE", f"{field} must be {self.range_text()}; got {value!r}")
        return typed


class ExtraParams:
    """The keys a model honours; `parse` turns a request's extra_params into typed settings."""

    def __init__(self, model: str, params: Iterable[ExtraParam]) -> None:
        self.model = model
        self.params = {param.name: param for param in params}

    def __iter__(self):
        return iter(self.params.values())

    def __len__(self) -> int:
        return len(self.params)

    def names(self) -> list[str]:
        return list(self.params)

    def parse(self, extra: Mapping[str, Any] | None) -> dict[str, Any]:
        """Settings by `ExtraParam.setting` for the keys given; unknown keys are refused by name."""
        extra = dict(extra or {})
        unknown = sorted(set(extra) - set(self.params))
        if unknown:
            raise InvalidField(
                "extra_params", "FIELD_NOT_SUPPORTED",
                f"extra_params {', '.join(unknown)} not supported by {self.model}; it accepts: {', '.join(self.params) or 'none'}",
            )
        return {self.params[key].setting: self.params[key].parse(value) for key, value in extra.items()}
