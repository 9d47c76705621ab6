"""Render the Vocalis Helm chart without helm: the part of Go templates and Sprig that the chart uses, nothing more.

No helm binary can be installed here (no package registry reachable from this machine ships one), so the chart test
renders the templates with this and validates the result. Any construct outside the subset raises
UnsupportedTemplate rather than rendering something helm would not: the chart must stay within what this knows
(if/else/with/end, define/include, pipelines, and the functions in FUNCTIONS).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class UnsupportedTemplate(ValueError):
    pass


_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(\()|(\))|(\|)|(-?\d+)|(\.[\w.]*)|([A-Za-z_]\w*))')


@dataclass
class Block:
    kind: str  # "root", "if", "with", "define"
    argument: str = ""
    body: list = field(default_factory=list)
    otherwise: list | None = None


def parse(source: str) -> Block:
    pieces: list[tuple[str, str]] = []
    position = 0
    for match in _ACTION.finditer(source):
        text = source[position : match.start()]
        if match.group(1):
            text = text.rstrip()
        pieces.append(("text", text))
        pieces.append(("action", match.group(2).strip()))
        position = match.end()
        if match.group(3):
            rest = source[position:]
            position += len(rest) - len(rest.lstrip())
    pieces.append(("text", source[position:]))
    root = Block("root")
    stack = [root]
    for kind, value in pieces:
        top = stack[-1]
        target = top.otherwise if top.otherwise is not None else top.body
        if kind == "text":
            if value:
                target.append(value)
        elif value.startswith("/*"):
            if not value.endswith("*/"):
                raise UnsupportedTemplate(value)
        elif value == "end":
            if len(stack) == 1:
                raise UnsupportedTemplate("end without a block")
            stack.pop()
        elif value == "else":
            if top.kind not in ("if", "with") or top.otherwise is not None:
                raise UnsupportedTemplate("else outside if/with")
            top.otherwise = []
        else:
            word = value.split(None, 1)[0]
            if word in ("if", "with", "define"):
                block = Block(word, value[len(word) :].strip())
                target.append(block)
                stack.append(block)
            elif word in ("range", "template", "block", "else if") or value.startswith(("$", "else ")):
                raise UnsupportedTemplate(value)
            else:
                target.append(("output", value))
    if len(stack) != 1:
        raise UnsupportedTemplate(f"{stack[-1].kind} {stack[-1].argument!r} has no end")
    return root


def tokens(expression: str) -> list[tuple[str, str]]:
    found, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        if match is None or match.end() == position:
            raise UnsupportedTemplate(f"cannot read {expression[position:]!r}")
        kinds = ("string", "open", "close", "pipe", "number", "path", "name")
        kind = next(k for k, g in zip(kinds, match.groups(), strict=True) if g is not None)
        found.append((kind, match.group(match.lastindex)))
        position = match.end()
    return found


def to_yaml(value: Any) -> str:
    if value in ({}, [], None):
        return {dict: "{}", list: "[]"}.get(type(value), "null")
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {})


def text_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<no value>"
    if isinstance(value, (dict, list)):
        raise UnsupportedTemplate(f"printing a {type(value).__name__} (use toYaml)")
    return str(value)


def _printf(fmt: str, *args: Any) -> str:
    return re.sub(r"%[sdv]", "{}", fmt).format(*(text_of(a) for a in args))


FUNCTIONS = {
    "quote": lambda value: json.dumps(text_of(value), ensure_ascii=False),  # Go's %q, for the strings a chart holds
    "default": lambda fallback, value=None: value if truthy(value) else fallback,
    "nindent": lambda count, text: "\n" + "\n".join(" " * count + line if line else line for line in text_of(text).split("\n")),
    "toYaml": to_yaml,
    "trunc": lambda count, text: text_of(text)[:count],
    "trimSuffix": lambda suffix, text: text_of(text)[: -len(suffix)] if text_of(text).endswith(suffix) and suffix else text_of(text),
    "printf": _printf,
    "not": lambda value: not truthy(value),
    "or": lambda *values: next((v for v in values if truthy(v)), values[-1]),
    "and": lambda *values: next((v for v in values if not truthy(v)), values[-1]),
    "add": lambda *values: sum(int(v) for v in values),
    "join": lambda separator, items: separator.join(text_of(item) for item in items),
}


class Renderer:
    def __init__(self, chart: Path, values: dict, release: str = "demo") -> None:
        meta = yaml.safe_load((chart / "Chart.yaml").read_text())
        self.top = {
            "Values": values,
            "Release": {"Name": release, "Service": "Helm", "Namespace": "default"},
            "Chart": {"Name": meta["name"], "AppVersion": meta["appVersion"], "Version": meta["version"]},
        }
        self.defines: dict[str, list] = {}
        self.templates: dict[str, Block] = {}
        for path in sorted((chart / "templates").iterdir()):
            tree = parse(path.read_text())
            for node in tree.body:
                if isinstance(node, Block) and node.kind == "define":
                    self.defines[self._string(node.argument)] = node.body
            self.templates[path.name] = tree

    def render(self) -> dict[str, str]:
        """Rendered text of every template that is not a helper (helpers start with an underscore)."""
        return {name: self._nodes(tree.body, self.top) for name, tree in self.templates.items() if not name.startswith("_")}

    @staticmethod
    def _string(argument: str) -> str:
        found = tokens(argument)
        if len(found) != 1 or found[0][0] != "string":
            raise UnsupportedTemplate(f"expected one string: {argument!r}")
        return found[0][1][1:-1]

    def _nodes(self, nodes: list, dot: Any) -> str:
        out = []
        for node in nodes:
            if isinstance(node, str):
                out.append(node)
            elif isinstance(node, Block):
                if node.kind == "define":
                    continue
                value = self._pipeline(tokens(node.argument), dot)
                if truthy(value):
                    out.append(self._nodes(node.body, value if node.kind == "with" else dot))
                elif node.otherwise is not None:
                    out.append(self._nodes(node.otherwise, dot))
            else:
                out.append(text_of(self._pipeline(tokens(node[1]), dot)))
        return "".join(out)

    def _pipeline(self, found: list[tuple[str, str]], dot: Any) -> Any:
        commands: list[list[tuple[str, str]]] = [[]]
        depth = 0
        for token in found:
            if token[0] == "pipe" and depth == 0:
                commands.append([])
                continue
            depth += {"open": 1, "close": -1}.get(token[0], 0)
            commands[-1].append(token)
        value: Any = _NOTHING
        for command in commands:
            value = self._command(command, dot, value)
        return value

    def _command(self, found: list[tuple[str, str]], dot: Any, piped: Any) -> Any:
        if not found:
            raise UnsupportedTemplate("empty command")
        args: list[Any] = []
        index = 1 if found[0][0] == "name" else 0
        while index < len(found):
            kind, text = found[index]
            if kind == "open":
                depth, end = 1, index + 1
                while depth:
                    depth += {"open": 1, "close": -1}.get(found[end][0], 0)
                    end += 1
                args.append(self._pipeline(found[index + 1 : end - 1], dot))
                index = end
                continue
            args.append(self._operand(kind, text, dot))
            index += 1
        if piped is not _NOTHING:
            args.append(piped)
        if found[0][0] != "name":
            if len(args) != 1:
                raise UnsupportedTemplate(f"a value cannot take arguments: {found}")
            return args[0]
        name = found[0][1]
        if name == "include":
            template, context = args
            return self._nodes(self.defines[template], context)
        if name not in FUNCTIONS:
            raise UnsupportedTemplate(f"function {name!r}")
        return FUNCTIONS[name](*args)

    def _operand(self, kind: str, text: str, dot: Any) -> Any:
        if kind == "string":
            return bytes(text[1:-1], "utf-8").decode("unicode_escape")
        if kind == "number":
            return int(text)
        if kind == "path":
            value = dot  # like Go templates: a path starts at dot, which `with` and `include` move
            for part in text.strip(".").split(".") if text != "." else ():
                if not isinstance(value, dict):
                    raise UnsupportedTemplate(f"{text}: {part} of a {type(value).__name__}")
                value = value.get(part)
            return value
        raise UnsupportedTemplate(f"{kind} {text!r}")


_NOTHING = object()


def render_chart(chart: Path, overrides: dict | None = None, release: str = "demo") -> list[dict]:
    """Every Kubernetes object the chart renders with its values.yaml merged with `overrides`."""
    values = yaml.safe_load((chart / "values.yaml").read_text())
    _merge(values, overrides or {})
    documents = []
    for name, text in Renderer(chart, values, release).render().items():
        for document in yaml.safe_load_all(text):
            if document is not None:
                document.setdefault("__template__", name)
                documents.append(document)
    return documents


def _merge(base: dict, overrides: dict) -> None:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
