"""from_json: declared keys only, tuples where declared, defaults for missing keys, built sections win, aliases, and
the strict reading that names a missing or mistyped field."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from vocalis.stages.api.config_json import ConfigFile, from_json, read_json


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


@dataclass(frozen=True)
class Sized:
    norm_eps: float
    layers: int
    blocks: tuple[tuple[int, ...], ...] = ((1,),)
    name: str = "x"


def test_from_json_reads_aliases_with_the_fields_own_spelling_first():
    assert from_json(Sized, {"rms_norm_eps": 1e-5, "layers": 2}, aliases={"rms_norm_eps": "norm_eps"}).norm_eps == 1e-5
    both = {"rms_norm_eps": 1e-5, "norm_eps": 1e-6, "layers": 2}
    assert from_json(Sized, both, aliases={"rms_norm_eps": "norm_eps"}).norm_eps == 1e-6


def test_from_json_makes_nested_lists_tuples():
    assert from_json(Sized, {"norm_eps": 1, "layers": 2, "blocks": [[1, 3], [5]]}).blocks == ((1, 3), (5,))


def test_a_strict_read_names_the_missing_or_mistyped_field():
    assert from_json(Sized, {"norm_eps": 1, "layers": 2}, where="cfg").norm_eps == 1.0  # an int where a float is declared
    with pytest.raises(ValueError, match=r"cfg\.layers is missing"):
        from_json(Sized, {"norm_eps": 1e-6}, where="cfg")
    for wrong in ({"layers": True}, {"layers": 2.5}, {"norm_eps": "1e-6"}, {"name": 3}):
        with pytest.raises(ValueError, match=rf"cfg\.{next(iter(wrong))} must be"):
            from_json(Sized, {"norm_eps": 1e-6, "layers": 2} | wrong, where="cfg")


def test_read_json_refuses_another_model_type_naming_the_file(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "other", "layers": 2}')
    assert read_json(tmp_path) == {"model_type": "other", "layers": 2}
    with pytest.raises(ValueError, match=r"config\.json: model_type is 'other', not 'mine'"):
        read_json(tmp_path, "mine")


@dataclass(frozen=True)
class Mine(ConfigFile):
    MODEL_TYPE = "mine"
    layers: int

    @classmethod
    def from_dict(cls, data):
        return from_json(cls, data, where="config.json")


def test_a_config_file_is_its_from_dict_over_config_json_of_its_model_type(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "mine", "layers": 2}')
    assert Mine.from_dir(tmp_path) == Mine(layers=2)
    (tmp_path / "config.json").write_text('{"model_type": "other", "layers": 2}')
    with pytest.raises(ValueError, match=r"model_type is 'other', not 'mine'"):
        Mine.from_dir(tmp_path)
