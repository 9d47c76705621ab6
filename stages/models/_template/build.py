"""Build a random tiny checkpoint in the template family's layout: config.json + model.safetensors (what the tests
serve; a real family's tiny checkpoints are built by its tests, `tests/goldens/<family>/`)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from vocalis.stages.models._template.config import MODEL_TYPE, TinyConfig
from vocalis.stages.models._template.modules import TinyCodecDecoder, TinyTalker

TALKER = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "num_codebooks": 4, "codebook_size": 64, "eos_token_id": 0, "bos_token_id": 1,
    "rope_theta": 10000.0, "max_position_embeddings": 1024,
}
"""The tiny talker's config.json section; `build_checkpoint`'s keyword arguments override it (`eos_token_id=64`: a
code the talker never draws, so that generation runs to `max_new_tokens`)."""
CODEC = {"num_codebooks": 4, "codebook_size": 64, "embed_dim": 32, "channels": 32, "kernel_size": 3, "num_layers": 3,
         "samples_per_frame": 160, "sample_rate": 16000}


def build_checkpoint(
    path: Path, seed: int = 0, init_std: float = 0.5, codec_init_std: float = 0.1, **talker_overrides: object
) -> Path:
    """Random weights: a wide init for the talker (a narrow one makes greedy decoding repeat one
    token), a narrow one for the codec (keeps activations small, so float error stays far below 1e-5)."""
    path.mkdir(parents=True, exist_ok=True)
    data = {"model_type": MODEL_TYPE, "talker_config": TALKER | talker_overrides, "codec_config": CODEC}
    (path / "config.json").write_text(json.dumps(data, indent=2))
    config = TinyConfig.from_dir(path)
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
    return path
