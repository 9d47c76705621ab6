"""The bytes of weights a loaded model holds (parameters and buffers of the torch modules its stages reach), each
storage counted once: what a dtype or quantize deploy option changes. Stages share modules (a voice stage holds the
generator's checkpoint too), so the model is counted whole, not per stage."""

from __future__ import annotations

from collections import deque

import torch
from torch import nn


def stage_modules(stage: object, depth: int = 4) -> list[nn.Module]:
    """The torch modules reachable from `stage` through attributes, lists, tuples and dicts (not inside a module)."""
    found: dict[int, nn.Module] = {}
    seen: set[int] = set()
    queue = deque([(stage, 0)])
    while queue:
        obj, level = queue.popleft()
        if id(obj) in seen or level > depth:
            continue
        seen.add(id(obj))
        if isinstance(obj, nn.Module):
            found[id(obj)] = obj
            continue
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, list | tuple | set):
            children = list(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type | torch.Tensor):
            children = list(vars(obj).values())
        else:
            continue
        queue.extend((child, level + 1) for child in children)
    return list(found.values())


def weight_bytes(modules: list[nn.Module], exclude: set[int] | None = None) -> tuple[int, set[int]]:
    """(bytes, the storages counted): every parameter and buffer once, leaving out storages in `exclude`."""
    counted = set(exclude or ())
    total = 0
    for module in modules:
        for tensor in [*module.parameters(), *module.buffers()]:
            if tensor.device.type == "meta":
                continue
            if tensor.is_mkldnn:  # a weight in oneDNN's layout (PackedLinear): no storage to share, its own elements
                key, size = id(tensor), tensor.numel() * tensor.element_size()
            else:
                key, size = tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes()
            if key in counted:
                continue
            counted.add(key)
            total += size
    return total, counted


def model_weight_bytes(model) -> int:
    """Every stage's weights, each storage once."""
    return weight_bytes([m for stage in model.pipeline.stages for m in stage_modules(stage)])[0]
