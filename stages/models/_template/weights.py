"""The template family's checkpoint (config.json + model.safetensors) into its modules, loaded strictly."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from vocalis.stages.models._template.config import TinyConfig
from vocalis.stages.models._template.modules import TinyCodecDecoder, TinyTalker


def load_modules(path: Path, dtype: torch.dtype = torch.float32, codec_dtype: torch.dtype = torch.float32
                 ) -> tuple[TinyConfig, TinyTalker, TinyCodecDecoder]:
    """The talker in `dtype`, the codec in `codec_dtype` (each stage's deploy `dtype`)."""
    config = TinyConfig.from_dir(path)
    weights = load_file(str(path / "model.safetensors"))
    talker, codec = TinyTalker(config.talker), TinyCodecDecoder(config.codec)
    talker.load_state_dict({k.removeprefix("talker."): v for k, v in weights.items() if k.startswith("talker.")}, strict=True)
    codec.load_state_dict({k.removeprefix("codec."): v for k, v in weights.items() if k.startswith("codec.")}, strict=True)
    return config, talker.to(dtype).eval(), codec.to(codec_dtype).eval()
