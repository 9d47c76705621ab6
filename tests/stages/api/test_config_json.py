"""from_json: declared keys only, tuples where declared, defaults for missing keys, built sections win."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from vocalis.stages.api.config_json import from_json


@dataclass(frozen=True)
class Inner:
    size: int = 4


@dataclass(frozen=True)
class Outer:
    inner: Inner
    rates: tuple[int, ...] = (2, 2)
    maybe_rates: tuple[int, ...] | None = None
    names: dict[str, int] | None = None
    eps: float = 1e-6


def test_from_json_reads_declared_keys_and_ignores_the_rest():
    config = from_json(Outer, {"rates": [8, 5], "maybe_rates": [1], "names": {"a": 1}, "dropout": 0.1, "inner": {"size": 9}},
                       inner=from_json(Inner, {"size": 7}))
    assert config == Outer(inner=Inner(7), rates=(8, 5), maybe_rates=(1,), names={"a": 1}, eps=1e-6)
    assert isinstance(config.rates, tuple)


def test_from_json_takes_defaults_for_missing_keys_and_none_data():
    assert from_json(Inner, None) == Inner()
    with pytest.raises(TypeError):
        from_json(Outer, {})  # `inner` has no default and was not given
