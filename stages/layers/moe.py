"""The sparse mixture-of-experts MLP of Qwen3.5-MoE (and the Qwen2-MoE line): top-k routed experts plus a gated
shared expert.

Names as transformers holds them: `gate.weight` (the router, [experts, hidden]), `experts.gate_up_proj`
([experts, 2 x moe_intermediate, hidden]: each expert's gate rows then its up rows), `experts.down_proj`
([experts, hidden, moe_intermediate]), `shared_expert.{gate,up,down}_proj`, `shared_expert_gate.weight`. Published
checkpoints store the experts one by one (`experts.<e>.gate_proj.weight`, ...): `fuse_expert_weights` stacks them,
one layer at a time as a load asks for it.

Routing: softmax over all experts in float32, the top k renormalised to sum to 1. Dispatch is batched: the step's
(token, choice) pairs are sorted by expert, each expert runs once over its contiguous slice (one matrix product per
expert hit, never a loop over tokens), and the weighted outputs are scattered back with index_add.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.layers.mlp import GatedMLP
from vocalis.stages.layers.weights import DerivedWeights, Recipe, shape_of


class RoutedExperts(nn.Module, ABC):
    """The batched dispatch over `num_experts` experts; how an expert's weights are held is the subclass's
    (`Experts`: ordinary parameters; a quantised store dequantises one expert at use)."""

    def __init__(self, num_experts: int) -> None:
        super().__init__()
        self.num_experts = num_experts

    @abstractmethod
    def expert_weights(self, expert: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(gate_up [2 x intermediate, hidden], down [hidden, intermediate]) of one expert, for inputs of `dtype`.
        A quantised store may hand back buffers that its next call overwrites (Drama 3's dequantised FP8 experts):
        use them before asking for another expert, as `forward` does."""

    def forward(self, x: torch.Tensor, chosen: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """x [T, H]; chosen/weights [T, k]: each token's experts and their weights. Returns [T, H]."""
        k = chosen.shape[1]
        flat = chosen.reshape(-1)
        order = flat.argsort(stable=True)
        tokens = order // k
        counts = torch.bincount(flat, minlength=self.num_experts).tolist()  # one host sync per layer
        rows = x[tokens]
        out = torch.empty_like(rows)
        start = 0
        for expert, count in enumerate(counts):
            if count == 0:
                continue
            part = rows[start : start + count]
            gate_up, down = self.expert_weights(expert, part.dtype)
            gate, up = F.linear(part, gate_up).chunk(2, dim=-1)
            out[start : start + count] = F.linear(F.silu(gate) * up, down)
            start += count
        out = out * weights.reshape(-1)[order, None].to(out.dtype)
        return torch.zeros_like(x).index_add_(0, tokens, out)


class Experts(RoutedExperts):
    def __init__(self, num_experts: int, hidden: int, intermediate: int) -> None:
        super().__init__(num_experts)
        self.gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate, hidden))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden, intermediate))
        nn.init.normal_(self.gate_up_proj, std=hidden**-0.5)
        nn.init.normal_(self.down_proj, std=intermediate**-0.5)

    def expert_weights(self, expert: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gate_up_proj[expert], self.down_proj[expert]


ExpertsFactory = Callable[[int, int, int], RoutedExperts]
"""(num_experts, hidden, intermediate) -> the routed experts' store: `Experts`, or a quantised one."""


class SparseMoE(nn.Module):
    def __init__(self, hidden: int, num_experts: int, top_k: int, intermediate: int, shared_intermediate: int,
                 experts: ExpertsFactory = Experts) -> None:
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = experts(num_experts, hidden, intermediate)
        self.shared_expert = GatedMLP(hidden, shared_intermediate)
        self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        probs = torch.softmax(self.gate(flat), dim=-1, dtype=torch.float32)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(flat.dtype)
        routed = self.experts(flat, chosen, weights)
        shared = torch.sigmoid(self.shared_expert_gate(flat)) * self.shared_expert(flat)
        return (routed + shared).reshape(shape)


_PER_EXPERT = re.compile(r"(.*\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight")


def fuse_expert_weights(weights: Mapping[str, torch.Tensor]) -> DerivedWeights:
    """Per-expert tensors (`<prefix>.experts.<e>.{gate,up,down}_proj.weight`, as published) stacked into the fused
    `<prefix>.experts.gate_up_proj` / `down_proj`; other tensors unchanged. Lazy: a fused tensor is made when asked
    for, from its own layer's per-expert tensors read one at a time, so a load holds one layer's experts at most.
    Raises, reading nothing, if an expert is missing a part or its parts' shapes differ from expert 0's."""
    recipes: dict[str, Recipe] = {}
    groups: dict[str, dict[int, dict[str, str]]] = {}
    for name in weights:
        match = _PER_EXPERT.fullmatch(name)
        if match is None:
            recipes[name] = (shape_of(weights, name), lambda name=name: weights[name])
        else:
            groups.setdefault(match[1], {}).setdefault(int(match[2]), {})[match[3]] = name
    for prefix, experts in groups.items():
        count = max(experts) + 1
        for e in range(count):
            missing = {"gate_proj", "up_proj", "down_proj"} - set(experts.get(e, {}))
            if missing:
                raise ValueError(f"{prefix}.{e} lacks {sorted(missing)}")
        recipes[f"{prefix}.gate_up_proj"] = _stacked(weights, [(experts[e]["gate_proj"], experts[e]["up_proj"]) for e in range(count)])
        recipes[f"{prefix}.down_proj"] = _stacked(weights, [(experts[e]["down_proj"],) for e in range(count)])
    return DerivedWeights(recipes)


def _stacked(weights: Mapping[str, torch.Tensor], experts: list[tuple[str, ...]]) -> Recipe:
    """[experts, rows, ...]: each expert's parts joined along their rows, in the order named, the experts stacked;
    written into one tensor as each part is read (never the list of all parts, then their stack)."""
    shapes = [tuple(shape_of(weights, name) for name in parts) for parts in experts]
    for parts, shape in zip(experts, shapes, strict=True):
        if shape != shapes[0] or any(s[1:] != shape[0][1:] for s in shape):
            raise ValueError(f"{parts[0]}: shapes {list(shape)} do not stack with expert 0's {list(shapes[0])}")
    joined = (len(experts), sum(s[0] for s in shapes[0]), *shapes[0][0][1:])

    def make() -> torch.Tensor:
        out: torch.Tensor | None = None
        for e, parts in enumerate(experts):
            row = 0
            for name in parts:
                part = weights[name]
                if out is None:
                    out = torch.empty(joined, dtype=part.dtype)
                out[e, row : row + len(part)] = part
                row += len(part)
        assert out is not None
        return out

    return joined, make
