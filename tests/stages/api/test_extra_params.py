"""The one extra_params validator: types, ranges, choices, aliases, and refusals that name the key."""

from __future__ import annotations

import pytest

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams

SPEC = ExtraParams("Model", [
    ExtraParam("steps", int, "steps", minimum=1, maximum=8),
    ExtraParam("top_p", float, "nucleus", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("greedy", bool, "no sampling"),
    ExtraParam("mode", str, "how", choices=("a", "b")),
    ExtraParam("n", int, "alias of steps", minimum=1, maximum=8, target="steps"),
])


def refused(extra: dict, field: str, reason: str) -> str:
    with pytest.raises(InvalidField) as caught:
        SPEC.parse(extra)
    assert (caught.value.field, caught.value.reason) == (field, reason), caught.value.message
    return caught.value.message


def test_values_are_typed_and_aliases_set_their_target():
    assert SPEC.parse({"steps": 3.0, "top_p": 1, "greedy": True, "mode": "b"}) == {"steps": 3, "top_p": 1.0, "greedy": True, "mode": "b"}
    assert SPEC.parse({"n": 2}) == {"steps": 2}
    assert SPEC.parse(None) == {} and isinstance(SPEC.parse({"top_p": 1})["top_p"], float)


def test_refusals_name_the_key_and_say_what_it_must_be():
    assert "not supported by Model; it accepts: steps, top_p, greedy, mode, n" in refused({"temp": 1, "steps": 2}, "extra_params", "FIELD_NOT_SUPPORTED")
    assert refused({"steps": 2.5}, "extra_params.steps", "INVALID_VALUE").endswith("must be an integer")
    assert "must be from 1 to 8; got 9" in refused({"steps": 9}, "extra_params.steps", "OUT_OF_RANGE")
    assert "must be above 0 and at most 1" in refused({"top_p": 0}, "extra_params.top_p", "OUT_OF_RANGE")
    refused({"top_p": True}, "extra_params.top_p", "INVALID_VALUE")
    refused({"greedy": 1}, "extra_params.greedy", "INVALID_VALUE")
    assert "one of a, b" in refused({"mode": "c"}, "extra_params.mode", "INVALID_VALUE")


def test_a_spec_names_its_json_type():
    assert [p.type_name for p in SPEC] == ["integer", "number", "boolean", "string", "integer"]
    with pytest.raises(TypeError):
        ExtraParam("x", dict, "objects are not a kind")


def test_a_list_kind_takes_json_arrays_only():
    grid = ExtraParam("t_grid", list, "time points")
    assert grid.type_name == "array" and grid.parse([0, 0.5, 1]) == [0, 0.5, 1]
    with pytest.raises(InvalidField, match="extra_params.t_grid must be a list"):
        grid.parse(0.5)
