"""Build a random tiny checkpoint in the template family's layout: config.json + model.safetensors (what the tests
serve; a real family's tiny checkpoints are built by its tests, `tests/goldens/<family>/`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from safetensors.torch import save_file

from vocalis.stages.models._template.config import CodecConfig, TalkerConfig, TinyConfig
from vocalis.stages.models._template.modules import TinyCodecDecoder, TinyTalker


def build_checkpoint(
    path: Path, seed: int = 0, init_std: float = 0.5, codec_init_std: float = 0.1, **talker_overrides: object
) -> Path:
    """Random weights: a wide init for the talker (a narrow one makes greedy decoding repeat one
    token), a narrow one for the codec (keeps activations small, so float error stays far below 1e-5)."""
    path.mkdir(parents=True, exist_ok=True)
    config = TinyConfig(talker=dataclasses.replace(TalkerConfig(), **talker_overrides), codec=CodecConfig())
    torch.manual_seed(seed)
    talker, codec = TinyTalker(config.talker), TinyCodecDecoder(config.codec)
    with torch.no_grad():
        for module, std in ((talker, init_std), (codec, codec_init_std)):
            for name, parameter in module.named_parameters():
                if "norm" not in name:
                    parameter.normal_(0.0, std)
    weights = {f"talker.{k}": v.contiguous() for k, v in talker.state_dict().items()}
    weights |= {f"codec.{k}": v.contiguous() for k, v in codec.state_dict().items()}
    save_file(weights, str(path / "model.safetensors"))
    (path / "config.json").write_text(config.to_json())
    return path
