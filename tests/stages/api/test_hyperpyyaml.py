"""HyperPyYAML read as data: tags become dicts naming their class, references resolve (with arithmetic), and
nothing a file names is imported or called."""

from __future__ import annotations

import sys

import pytest

from vocalis.stages.api.hyperpyyaml import ARGS_KEY, CLASS_KEY, load_hyperpyyaml

YAML = """
__set_seed: !apply:random.seed [1986]
chunk_size: 25
ratio: 2
rate: 24000
model: !new:some_unimportable_package.Model
    size: !ref <chunk_size> * <ratio>
    half: !ref <rate> // 2 - 1
    inner: !new:some_unimportable_package.Inner
        rate: !ref <rate>
    params: !new:omegaconf.DictConfig
        content:
            cfg: 0.7
alias: !ref <model.inner>
func: !name:os.system
    command: "touch /nonexistent"
negative: !ref -<ratio>
"""


def test_tags_references_and_arithmetic(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text(YAML)
    data = load_hyperpyyaml(path)
    assert data["__set_seed"] == {CLASS_KEY: "random.seed", ARGS_KEY: [1986]}
    model = data["model"]
    assert model[CLASS_KEY] == "some_unimportable_package.Model" and model["size"] == 50 and model["half"] == 11999
    assert model["inner"] == {CLASS_KEY: "some_unimportable_package.Inner", "rate": 24000} == data["alias"]
    assert model["params"]["content"] == {"cfg": 0.7}
    assert data["func"] == {CLASS_KEY: "os.system", "command": "touch /nonexistent"} and data["negative"] == -2
    assert "some_unimportable_package" not in sys.modules


def test_only_arithmetic_is_evaluated(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: !ref <a> ** 99 ** 99\n")
    with pytest.raises(ValueError, match="unsupported expression"):
        load_hyperpyyaml(path)
