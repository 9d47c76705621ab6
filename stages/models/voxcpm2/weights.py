"""A VoxCPM2 checkpoint directory, unchanged from its publisher, into ready torch modules.

The layout: config.json, model.safetensors (`base_lm.*`, `residual_lm.*`, `feat_encoder.*`,
`feat_decoder.estimator.*`, `fsq_layer.*`, the projections, `stop_*`), audiovae.safetensors
(`encoder.*`, `decoder.*`, weight-normalised convolutions), tokenizer.json + tokenizer_config.json.
Loading is strict (vocalis.stages.layers.weights): every tensor of a file must land in a module and every module tensor
must come from the file. Weight norm is folded into a plain `weight`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from vocalis.stages.layers.weights import SafetensorsReader, build_empty, fold_weight_norm, load_strict, read_safetensors
from vocalis.stages.models.voxcpm2.config import VoxCPM2Config
from vocalis.stages.models.voxcpm2.modules import VoxCPM2
from vocalis.stages.models.voxcpm2.tokenizer import TextTokenizer
from vocalis.stages.models.voxcpm2.vae import AudioVAE


@dataclass
class VoxCPM2Modules:
    path: Path
    config: VoxCPM2Config
    tokenizer: TextTokenizer
    model: VoxCPM2
    vae: AudioVAE
    """Always float32, as the reference runs it."""


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", vae_device: str | None = None) -> VoxCPM2Modules:
    path = Path(path)
    config = VoxCPM2Config.from_dir(path)
    tokenizer = TextTokenizer(path)
    if len(tokenizer) > config.lm.vocab_size:
        raise ValueError(f"{path}: the tokenizer has {len(tokenizer)} tokens, the LM embeds {config.lm.vocab_size}")
    model = build_empty(lambda: VoxCPM2(config), dtype)  # parameters in their dtype from the start: no float32 model to cast
    load_strict(model, SafetensorsReader(path / "model.safetensors"), path / "model.safetensors")
    vae = AudioVAE(config.audio_vae)
    load_strict(vae, fold_weight_norm(read_safetensors(path / "audiovae.safetensors")), path / "audiovae.safetensors")
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    vae = vae.to(device=vae_device or device, dtype=torch.float32).eval().requires_grad_(False)
    return VoxCPM2Modules(path, config, tokenizer, model, vae)
