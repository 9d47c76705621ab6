"""A Gepard-1.0 checkpoint directory, unchanged from its publisher, into the ready talker.

The layout: config.json (`qwen3_5_text`), gepard_config.json (the sidecar that makes it Gepard), model.safetensors
(or shards), tokenizer.json. Loading is strict: every module tensor comes from the file, and every file tensor lands
in a module or is declared unused (talker.UNUSED).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from tokenizers import Tokenizer

from vocalis.stages.layers.weights import DerivedWeights, SafetensorsReader, build_empty, load_strict, merged, renamed
from vocalis.stages.models.gepard.config import GepardConfig, is_gepard
from vocalis.stages.models.gepard.talker import UNUSED, GepardTalker


def load_talker(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> GepardTalker:
    path = Path(path)
    if not is_gepard(path):
        raise ValueError(f"{path}: not a Gepard checkpoint (no gepard_config.json beside config.json)")
    config = GepardConfig.from_dir(path)
    reader = SafetensorsReader(path)
    weights: Mapping[str, torch.Tensor] = reader
    if "audio_embed_scale" in reader and reader.shape("audio_embed_scale") == ():  # older checkpoints store it 0-dim
        weights = merged(renamed(reader, lambda key: None if key == "audio_embed_scale" else key),
                         DerivedWeights({"audio_embed_scale": ((1,), lambda: reader["audio_embed_scale"].reshape(1))}))
    # built in its dtype and read one tensor at a time: the load never holds a float32 talker or the file beside it
    talker = load_strict(build_empty(lambda: GepardTalker(config), dtype), weights, path, unused=UNUSED)
    return talker.to(device=device, dtype=dtype).eval()


def load_tokenizer(path: Path):
    """The checkpoint's text tokenizer as `text -> ids` (no special tokens added: the prompt builder adds them)."""
    tokenizer = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
