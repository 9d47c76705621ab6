"""A Gepard-1.0 checkpoint directory, unchanged from its publisher, into the ready talker.

The layout: config.json (`qwen3_5_text`), gepard_config.json (the sidecar that makes it Gepard), model.safetensors
(or shards), tokenizer.json. Loading is strict: every module tensor comes from the file, and every file tensor lands
in a module or is declared unused (talker.UNUSED).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer

from vocalis.stages.layers.weights import load_strict, read_safetensors
from vocalis.stages.models.gepard.config import GepardConfig, is_gepard
from vocalis.stages.models.gepard.talker import UNUSED, GepardTalker


def load_talker(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> GepardTalker:
    path = Path(path)
    if not is_gepard(path):
        raise ValueError(f"{path}: not a Gepard checkpoint (no gepard_config.json beside config.json)")
    config = GepardConfig.from_dir(path)
    weights = read_safetensors(path)
    scale = weights.get("audio_embed_scale")
    if scale is not None and scale.ndim == 0:  # older checkpoints store the scale 0-dim
        weights["audio_embed_scale"] = scale.reshape(1)
    talker = load_strict(GepardTalker(config), weights, path, unused=UNUSED)
    return talker.to(device=device, dtype=dtype).eval()


def load_tokenizer(path: Path):
    """The checkpoint's text tokenizer as `text -> ids` (no special tokens added: the prompt builder adds them)."""
    tokenizer = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
