"""The shelving of `stages/` as an executable rule: each package imports only the packages below it.

    text, api  <-  runtime  <-  layers  <-  components  <-  models/<lineage>_common  <-  models/<family>

`runtime` never imports a layer, a component or a family; `layers` never a component or a family; `components` never
a family; a family never imports another family (two families of one model line share a `*_common` lineage
package, which imports no family). The family API and the text policy are torch-free. Nothing but `__init__.py` and
the README sits at the root of `stages/`, and nothing in `stages/` imports the server, the gateway or the clients.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ROOT / "stages"
LINEAGE_SUFFIX = "_common"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(STAGES).with_suffix("").parts)


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Dotted names `path` imports (relative to vocalis.stages when inside it, else with the `vocalis.` prefix)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def _stages_target(name: str) -> str | None:
    """The `vocalis.stages` module that `name` (a module, or a name imported from one) is, or None outside it."""
    if not name.startswith("vocalis.stages."):
        return None
    parts = name.removeprefix("vocalis.stages.").split(".")
    while parts and not (STAGES.joinpath(*parts).with_suffix(".py").is_file() or STAGES.joinpath(*parts).is_dir()):
        parts.pop()
    return ".".join(parts) or None


def _shelf(module: str) -> str:
    """The package of a `vocalis.stages` module: runtime, layers, components, api, text, aligner, lineage, family."""
    parts = module.split(".")
    if parts[0] == "text" and len(parts) > 1 and parts[1] == "aligner":
        return "aligner"
    if parts[0] == "models":
        if len(parts) < 3:
            return "models"
        return "lineage" if parts[1].endswith(LINEAGE_SUFFIX) else "family"
    return parts[0]


FORBIDDEN = {
    "runtime": {"layers", "components", "lineage", "family", "aligner", "models"},
    "layers": {"components", "lineage", "family", "aligner", "models"},
    "components": {"lineage", "family", "aligner", "models"},
    "api": {"layers", "components", "lineage", "family", "aligner"},
    "text": {"runtime", "layers", "components", "lineage", "family", "aligner", "models", "api"},
    "lineage": {"family"},
}
"""What each shelf may not import (`aligner`, the forced aligner under text/, is a model and may use the floor)."""

FILES = sorted(STAGES.rglob("*.py"))


def test_the_root_of_stages_holds_only_its_package_file_and_readme():
    assert sorted(p.name for p in STAGES.iterdir() if p.is_file()) == ["README.md", "__init__.py"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(STAGES)))
def test_each_shelf_imports_only_what_is_below_it(path: Path):
    module = _module(path)
    shelf = _shelf(module)
    wrong = []
    for name in _imports(path):
        if name.split(".")[:2] in (["vocalis", "server"], ["vocalis", "gateway"], ["vocalis", "clients"], ["vocalis", "tts"]):
            wrong.append(name)
        target = _stages_target(name)
        if target is None:
            continue
        other = _shelf(target)
        if other in FORBIDDEN.get(shelf, set()):
            wrong.append(name)
        if shelf == "family" and other == "family" and target.split(".")[1] != module.split(".")[1]:
            wrong.append(name)  # a family never imports another family
    assert not wrong, f"{module} ({shelf}) imports {sorted(set(wrong))}"


@pytest.mark.parametrize("path", [p for p in FILES if _shelf(_module(p)) in ("api", "text")],
                         ids=lambda p: str(p.relative_to(STAGES)))
def test_the_family_api_and_text_policy_are_torch_free(path: Path):
    assert not {n for n in _imports(path, top_level_only=True) if n.split(".")[0] == "torch"}
