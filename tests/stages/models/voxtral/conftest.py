"""The tiny Voxtral checkpoint, built once per session, and helpers to run its stages directly.

One intra-op thread while these tests run: the tiny modules are thousands of small ops, which torch's thread pool
only slows down on a busy machine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.goldens.voxtral.build_tiny import build
from vocalis.stages.models.voxtral.adapter import VoxtralInput
from vocalis.stages.models.voxtral.runtime import FrameGenerator
from vocalis.stages.models.voxtral.weights import VoxtralModules, load_modules
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@dataclass
class Tiny:
    path: Path
    modules: VoxtralModules
    generator: FrameGenerator


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Tiny:
    path = build(tmp_path_factory.mktemp("voxtral") / "tiny")
    modules = load_modules(path)
    return Tiny(path, modules, FrameGenerator(modules.lm, modules.tekken, modules.voices, 256))


def request(text: str, **fields) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=VoxtralInput(**{"voice": "neutral_female", **fields}), output=NullOutput())


def generate(generator: FrameGenerator, requests: list[SynthesisRequest], max_num_seqs: int = 8, budget: int = 512) -> dict[int, torch.Tensor]:
    """Every request's frames [N, 37], all requests batched together."""
    stage = AutoregressiveStage("frame_generator", generator, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget)
    for r in requests:
        stage.add(StageItem(r))
    frames: dict[int, list[torch.Tensor]] = {id(r): [] for r in requests}
    with torch.inference_mode():
        while stage.has_work():
            for item in stage.step():
                if item.payload is not None and len(item.payload):
                    frames[id(item.request)].append(item.payload)
    return {key: torch.cat(value) if value else torch.empty(0, 37, dtype=torch.long) for key, value in frames.items()}
