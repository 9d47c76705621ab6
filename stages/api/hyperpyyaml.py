"""Read a HyperPyYAML file (SpeechBrain's YAML dialect, which CosyVoice and GLM-TTS configure their models with) as
plain data, never importing or calling anything it names.

`!new:pkg.Class` / `!name:pkg.func` / `!apply:pkg.func` nodes become dicts with the dotted name under `CLASS_KEY`
(a mapping's entries beside it, a sequence's under `ARGS_KEY`); `!ref <key>` (with + - * / // arithmetic over
references and numbers) is resolved against the file's top level; other tags are kept as their plain value.
"""

from __future__ import annotations

import ast
import operator
import re
from pathlib import Path
from typing import Any

import yaml

CLASS_KEY = "__class__"
ARGS_KEY = "__args__"
_REF = re.compile(r"<([^<>]+)>")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.USub: operator.neg}


class _Ref:
    def __init__(self, expression: str) -> None:
        self.expression = expression


class _Loader(yaml.SafeLoader):
    pass


def _node_value(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    value = _node_value(loader, node)
    if isinstance(value, dict):
        return {CLASS_KEY: suffix, **value}
    return {CLASS_KEY: suffix, ARGS_KEY: value if isinstance(value, list) else ([value] if value not in ("", None) else [])}


for _tag in ("!new:", "!name:", "!apply:"):
    _Loader.add_multi_constructor(_tag, _tagged)
_Loader.add_constructor("!ref", lambda loader, node: _Ref(str(loader.construct_scalar(node))))
_Loader.add_multi_constructor("!", lambda loader, suffix, node: _node_value(loader, node))


def _lookup(root: dict[str, Any], key: str) -> Any:
    value: Any = root
    for part in key.split("."):
        value = value[part] if isinstance(value, dict) else value[int(part)]
    return value


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression in a !ref: {ast.dump(node)}")


def _resolve(value: Any, root: dict[str, Any], depth: int = 0) -> Any:
    if depth > 50:
        raise ValueError("!ref references nest too deep (a cycle?)")
    if isinstance(value, _Ref):
        expression = value.expression.strip()
        whole = _REF.fullmatch(expression)
        if whole:
            return _resolve(_lookup(root, whole.group(1)), root, depth + 1)
        values = {name: _resolve(_lookup(root, name), root, depth + 1) for name in _REF.findall(expression)}
        if not all(isinstance(v, (int, float)) for v in values.values()):
            return _REF.sub(lambda m: str(values[m.group(1)]), expression)
        return _evaluate(ast.parse(_REF.sub(lambda m: repr(values[m.group(1)]), expression), mode="eval"))
    if isinstance(value, dict):
        return {k: _resolve(v, root, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, root, depth) for v in value]
    return value


def load_hyperpyyaml(path: Path) -> dict[str, Any]:
    """The file's top-level mapping with every reference resolved; nothing it names is imported."""
    raw = yaml.load(Path(path).read_text(), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: not a mapping at the top level")
    return _resolve(raw, raw)
