"""Replacing a model's linear layers by quantised ones: the rule behind the `quantize` deploy setting (which kernel
each choice uses is stages/models/quantizable.py's; which stages get it, and the refusal of one that cannot, too).

A quantised linear kind (`QuantizedLinear`: stages/layers/int8_linear.py, int4_linear.py, int4_decode_linear.py; and
packed_linear.py, which keeps the dtype and changes only the layout, behind `packed_linears`) is built from one
nn.Linear or from several of one input, which it then runs as one product; it says which linears its kernel takes
(`accepts`). A kind applied after another replaces only what the first left as nn.Linear. A layer that reads several
linears of one input declares them (`JoinsInputs`), and uses the joined module when it is set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import torch
from torch import nn


@runtime_checkable
class JoinsInputs(Protocol):
    """A layer that reads several linears of one input and runs them as one when the attribute is set:
    {attribute: (names of the linears, in output order)} (QKVAttention, GatedMLP)."""

    fused_inputs: ClassVar[dict[str, tuple[str, ...]]]


class QuantizedLinear(Protocol):
    """A module that computes what its linears would (their outputs concatenated), from quantised weights."""

    parts: tuple[int, ...]
    """Each joined linear's output width, in order (split the output by these)."""

    def __init__(self, *linears: nn.Linear) -> None: ...

    @staticmethod
    def accepts(linear: nn.Linear) -> bool:
        """Whether the kernel takes this linear's shape."""
        ...

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class JoinedLinears:
    """One linear, or several of one input as one: what a quantised kind is built from."""

    weight: torch.Tensor
    """[sum of the outputs, in] float32, each linear's rows in order."""
    bias: torch.Tensor | None
    parts: tuple[int, ...]
    """Each joined linear's output width, in order (split the output by these)."""


def join_linears(kind: str, linears: tuple[nn.Linear, ...]) -> JoinedLinears:
    """The linears' weights and biases as one linear's; refuses linears that cannot be one product (none, different
    input widths, a bias on some only), naming `kind`."""
    if not linears or len({linear.in_features for linear in linears}) != 1:
        raise ValueError(f"{kind} takes one linear, or several of the same input width")
    if len({linear.bias is None for linear in linears}) != 1:
        raise ValueError(f"{kind}: the linears it joins must all have a bias or none")
    bias = None if linears[0].bias is None else torch.cat([linear.bias.detach() for linear in linears])
    return JoinedLinears(torch.cat([linear.weight.detach().float() for linear in linears]), bias,
                         tuple(linear.out_features for linear in linears))


def replace_linears(*modules: nn.Module, kind: type[QuantizedLinear], keep: tuple[nn.Module, ...] = (),
                    after_each: Callable[[], None] | None = None) -> int:
    """Replace every nn.Linear under `modules` that `kind` accepts (in place) by a `kind`, a linear shared by two
    parents by one; the number of linears replaced (0: none found). The kinds are the quantised linears and
    `PackedLinear`: one rule and the same joins, whether the weights change their precision or only their layout.
    The float weights are freed unless something else (a tied embedding) still holds them. `keep`: linears left in
    float, those whose weight the caller reads directly (a head indexed by rows, a dtype or device read from it). A
    linear `kind` does not accept stays in float too.

    In a layer that `JoinsInputs`, the linears it names become one `kind` under its attribute and leave the layer,
    where each is plain, accepted, in no other parent and not kept. `after_each` is called after each replacement,
    once the linears it replaced are freed (a load gives their memory back there)."""
    # Only modules with children: a list holding the linears themselves would keep every float weight alive until
    # the last was replaced (the float model and its quantised copy in memory at once, the load's peak).
    parents = [m for m in {id(m): m for module in modules for m in module.modules()}.values() if next(m.children(), None)]
    references = Counter(id(child) for parent in parents for child in parent.children())
    kept = {id(module) for module in keep}

    def replaceable(module: nn.Module) -> bool:
        return type(module) is nn.Linear and id(module) not in kept and kind.accepts(module)

    replaced = 0
    for parent in parents:
        for fused, names in (parent.fused_inputs if isinstance(parent, JoinsInputs) else {}).items():
            if not all(hasattr(parent, name) for name in names):  # joined already (a kind applied before this one)
                continue
            members = [getattr(parent, name) for name in names]
            if all(replaceable(m) and references[id(m)] == 1 for m in members) and \
                    len({m.bias is None for m in members}) == 1:
                setattr(parent, fused, kind(*members))
                for name in names:
                    delattr(parent, name)
                replaced += len(members)
                del members
                if after_each is not None:
                    after_each()
    replacements: dict[int, nn.Module] = {}
    for parent in parents:
        for name in [name for name, _ in parent.named_children()]:  # names only: a list of children would hold them
            child = getattr(parent, name)
            if replaceable(child):
                if id(child) not in replacements:
                    replacements[id(child)] = kind(child)
                setattr(parent, name, replacements[id(child)])
                del child
                if after_each is not None:
                    after_each()
    return replaced + len(replacements)
