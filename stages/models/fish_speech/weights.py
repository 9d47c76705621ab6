"""S2 Pro's checkpoint into its modules: `config.json`, the safetensors (sharded or not) loaded strictly into the
dual AR, and `codec.pth` into the shared DAC."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from vocalis.stages.layers.weights import SafetensorsReader, build_empty, load_strict
from vocalis.stages.models.fish_common.fish_dac import FishDAC, load_fish_dac
from vocalis.stages.models.fish_speech.config import FishSpeechConfig
from vocalis.stages.models.fish_speech.dual_ar import FishDualAR


@dataclass
class FishSpeechModules:
    config: FishSpeechConfig
    dual_ar: FishDualAR
    codec: FishDAC


def load_dual_ar(directory: Path, config: FishSpeechConfig, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> FishDualAR:
    # built in its dtype and read one tensor at a time: the load never holds a float32 model or the files beside it
    model = build_empty(lambda: FishDualAR(config), dtype)
    load_strict(model, SafetensorsReader(Path(directory)), Path(directory))
    return model.to(device=device, dtype=dtype).eval()


def load_modules(directory: Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> FishSpeechModules:
    config = FishSpeechConfig.from_dir(directory)
    codec = load_fish_dac(directory, device)
    if codec.config.num_codebooks != config.text.num_codebooks:
        raise ValueError(f"{directory}: the model makes frames of {config.text.num_codebooks} codes, the codec decodes "
                         f"{codec.config.num_codebooks}")
    if codec.config.semantic_codebook_size != config.text.codebook_size:
        raise ValueError(f"{directory}: the model's codebook_size is {config.text.codebook_size}, the codec's semantic "
                         f"codebook has {codec.config.semantic_codebook_size} entries")
    # The codec runs in float32: it is small, and its windowed transformers and Snake activations are sensitive.
    return FishSpeechModules(config, load_dual_ar(directory, config, device, dtype), codec)
