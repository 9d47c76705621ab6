"""A family loaded with its generator in bfloat16, as the server loads it, never holds that generator in float32, and
never reads a generator's file (safetensors, or a torch state dict) whole (issue 32: peak memory is the weights in
their loaded dtype, not a float32 copy built first, nor the file's tensors beside the model).

While the tiny checkpoint loads, every floating-point parameter registered on the CPU in float32 is counted for as
long as it lives: built with `build_empty`, a module's parameters each live only while they are registered (then moved
to the meta device), so at no moment do more float32 parameter bytes live than the loaded model keeps in float32 (its
codecs, and a float32 stage's weights packed for oneDNN) plus its largest parameter. A generator built in float32 and
cast after holds all of its float32 bytes at once.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from torch import nn

from bench.stage_weights import stage_modules
from tests import tiny_checkpoints as tiny
from vocalis.stages.layers import weights as layer_weights
from vocalis.stages.layers.packed_linear import PackedLinear
from vocalis.stages.models.registry import load_model


@dataclass
class LoadWatch:
    """Float32 CPU parameter bytes alive while a load runs (now and at most), and the files read whole (safetensors'
    load_file, or torch.load onto any device but meta)."""

    alive: dict[int, tuple[weakref.ref, int]] = field(default_factory=dict)
    bytes: int = 0
    peak: int = 0
    whole_files: list[Path] = field(default_factory=list)

    def registered(self, param: nn.Parameter | None) -> None:
        if param is None or id(param) in self.alive or param.device.type != "cpu" or param.dtype != torch.float32:
            return
        size = param.numel() * param.element_size()
        self.bytes += size
        self.peak = max(self.peak, self.bytes)
        key = id(param)
        self.alive[key] = (weakref.ref(param, lambda _: self.died(key)), size)

    def died(self, key: int) -> None:
        self.bytes -= self.alive.pop(key)[1]


@contextmanager
def watching_the_load(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoadWatch]:
    watch = LoadWatch()
    register = nn.Module.register_parameter

    def counted(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        watch.registered(param)

    def read_whole(path, *args, **kwargs):
        watch.whole_files.append(Path(path).resolve())
        return load_file(path, *args, **kwargs)

    def unpickled(path, *args, **kwargs):
        """torch.load reads every tensor of a file, unless onto the meta device (shapes and storage offsets only)."""
        if str(kwargs.get("map_location")) != "meta":
            watch.whole_files.append(Path(path).resolve())
        return torch_load(path, *args, **kwargs)

    load_file, torch_load = layer_weights.load_file, torch.load
    monkeypatch.setattr(nn.Module, "register_parameter", counted)
    monkeypatch.setattr(layer_weights, "load_file", read_whole)
    monkeypatch.setattr(torch, "load", unpickled)
    yield watch


@dataclass(frozen=True)
class Case:
    checkpoint: Callable[[Path], Path]
    bfloat16: tuple[str, ...]
    """The stages whose dtype is set to bfloat16 (the generator's; their modules are built in it)."""
    generator_files: tuple[str, ...]
    """Globs, under the checkpoint, of the files the generator is read from: never read whole."""


CASES = {
    "voxtral": Case(tiny.voxtral, ("frame_generator",), ("consolidated.safetensors",)),
    "fish_speech": Case(tiny.fish_speech, ("slow_ar",), ("*.safetensors",)),
    "higgs_audio_v2": Case(tiny.higgs_audio_v2, ("talker",), ("*.safetensors",)),
    "auk": Case(tiny.auk, ("condition", "flow"), ("model*.safetensors", "auk*.safetensors")),
    # fixed before these tests: kept from regressing
    "qwen3_tts": Case(tiny.qwen3_tts, ("talker",), ("model.safetensors",)),
    "voxcpm2": Case(tiny.voxcpm2, ("latent_generator",), ("model.safetensors",)),
    "omnivoice": Case(tiny.omnivoice, ("generator",), ("model.safetensors",)),
    "glm_tts": Case(tiny.glm_tts, ("llm",), ("llm/*.safetensors",)),
    "drama3": Case(tiny.drama3, ("talker",), ("*.safetensors",)),  # experts fused a layer at a time as they are copied
    "cosyvoice3": Case(tiny.cosyvoice3, ("llm",), ("llm.pt",)),  # a torch state dict: read whole by a torch.load off meta
}


@pytest.mark.parametrize("family", CASES)
def test_a_bfloat16_load_holds_no_float32_generator_and_reads_no_generator_file_whole(family, tmp_path, monkeypatch):
    case = CASES[family]
    checkpoint = case.checkpoint(tmp_path)
    overrides = {stage: {"dtype": "bfloat16", "device": "cpu"} for stage in case.bfloat16}
    with watching_the_load(monkeypatch) as watch:
        model = load_model(str(checkpoint), stage_overrides=json.dumps(overrides))
    try:
        modules = [m for stage in model.pipeline.stages for m in stage_modules(stage)]
        params = {id(p): p for m in modules for p in m.parameters()}.values()
        kept = sum(p.numel() * p.element_size() for p in params if p.device.type == "cpu" and p.dtype == torch.float32)
        # a float32 stage's packed linears (packed_linears) keep their weights as buffers in oneDNN's layout
        packed = {id(m): m for module in modules for m in module.modules() if isinstance(m, PackedLinear)}.values()
        kept += sum(m.weight_packed.numel() * 4 for m in packed if m.dtype == torch.float32)
        largest = max(p.numel() for p in params) * 4
        bfloat16 = sum(p.numel() for p in params if p.dtype == torch.bfloat16)
        assert bfloat16 > 0, "no stage runs in bfloat16: the overrides missed the generator"
        assert watch.peak <= kept + largest, (
            f"{family}: {watch.peak / 2**20:.2f} MiB of float32 parameters alive at once during the load, the loaded model "
            f"keeps {kept / 2**20:.2f} MiB in float32 (largest parameter {largest / 2**20:.2f} MiB)")
        generator_files = {p.resolve() for pattern in case.generator_files for p in checkpoint.glob(pattern)}
        assert generator_files, f"{family}: no file matches {case.generator_files}"
        assert not generator_files & set(watch.whole_files), f"{family}: read whole: {sorted(generator_files & set(watch.whole_files))}"
    finally:
        model.close()
