"""Reading the VoxCPM2 goldens (made by make_goldens.py) and running our stages on their cases."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import soundfile as sf
import torch
from safetensors.torch import load_file

from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Input
from vocalis.stages.models.voxcpm2.codec_stage import PatchDecoder
from vocalis.stages.models.voxcpm2.runtime import LatentGenerator
from vocalis.stages.models.voxcpm2.voices import VoiceClip, VoiceEncoder
from vocalis.stages.models.voxcpm2.weights import VoxCPM2Modules, load_modules
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

HERE = Path(__file__).resolve().parent
CONFIGS = ("tiny", "long")


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@cache
def summary() -> dict:
    return json.loads((HERE / "goldens.json").read_text())


@cache
def golden_tensors(config: str) -> dict[str, torch.Tensor]:
    return load_file(str(HERE / f"goldens_{config}.safetensors"))


def cases(config: str) -> list[dict]:
    return summary()["configs"][config]["cases"]


def all_cases() -> list[tuple[str, str]]:
    return [(config, case["name"]) for config in CONFIGS for case in cases(config)]


def case(config: str, name: str) -> dict:
    return next(c for c in cases(config) if c["name"] == name)


def tensor(config: str, name: str, key: str) -> torch.Tensor:
    return golden_tensors(config)[f"{name}.{key}"]


@cache
def clip(filename: str) -> VoiceClip:
    samples, rate = sf.read(str(HERE / filename), dtype="float32")
    return VoiceClip(samples=samples, sample_rate=rate)


@dataclass
class Family:
    """A golden checkpoint loaded as the loader wires it: modules, voice encoder, generator, decoder."""

    modules: VoxCPM2Modules
    voices: VoiceEncoder
    generator: LatentGenerator
    decoder: PatchDecoder


def load_family(config: str, generator_class: type[LatentGenerator] = LatentGenerator, dtype: torch.dtype = torch.float32) -> Family:
    modules = load_modules(HERE / config, dtype=dtype)
    voices = VoiceEncoder(modules.vae, modules.config)
    generator = generator_class(modules.model, modules.tokenizer, voices, 512)
    return Family(modules, voices, generator, PatchDecoder(modules.vae, modules.config, voices, frame_dtype=dtype))


def case_input(config: str, name: str, inject_noise: bool = True, **changes) -> VoxCPM2Input:
    c = case(config, name)
    values = dict(
        reference=clip(c["reference"]) if c.get("reference") else None,
        prompt=clip(c["prompt"]) if c.get("prompt") else None,
        prompt_text=c.get("prompt_text", ""),
        cfg_value=c["cfg_value"],
        inference_timesteps=c["inference_timesteps"],
        min_len=c["min_len"],
        max_new_tokens=c["max_len"],
        noise=tensor(config, name, "noise") if inject_noise else None,
    )
    return VoxCPM2Input(**{**values, **changes})


def case_request(config: str, name: str, **changes) -> SynthesisRequest:
    return SynthesisRequest(text=case(config, name)["text"], stage_input=case_input(config, name, **changes), output=NullOutput())


def generate(stage: AutoregressiveStage, requests: list[SynthesisRequest]) -> dict[int, torch.Tensor]:
    """Every request's patches [N, P, D], all requests batched together."""
    for request in requests:
        stage.add(StageItem(request))
    patches: dict[int, list[torch.Tensor]] = {id(r): [] for r in requests}
    with torch.inference_mode():
        while stage.has_work():
            for item in stage.step():
                if item.payload is not None and len(item.payload):
                    patches[id(item.request)].append(item.payload)
    return {key: torch.cat(value) for key, value in patches.items()}


def generator_stage(family: Family, max_num_seqs: int = 8, budget: int = 512) -> AutoregressiveStage:
    return AutoregressiveStage(
        "latent_generator", family.generator, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget, dtype=family.generator.dtype
    )
