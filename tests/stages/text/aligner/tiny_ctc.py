"""Tiny Wav2Vec2ForCTC checkpoints in the published layout, with seeded random weights, for the forced-aligner tests.

Two arrangements of the published checkpoints: "base" (facebook/wav2vec2-base-960h: group-normed
first convolution, post-norm layers) and "large" (wav2vec2-large-lv60 and MMS: layer-normed
convolutions, pre-norm layers). Sizes shrunk; the positional convolution is stored weight-normed,
as transformers saves it. The same seed gives the same tensors on any machine, so the goldens
made from them by tests/goldens/forced_aligner/make_goldens.py hold for a fresh build.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file

from vocalis.stages.components.wav2vec2 import Wav2Vec2Config
from vocalis.stages.text.aligner.aligner import Wav2Vec2ForCTC

VOCAB = ["<pad>", "<s>", "</s>", "<unk>", "|", *"ETAONIHSRDLUMWCFGYPBVK'XJQZ"]
VARIANTS = {
    "base": {"feat_extract_norm": "group", "do_stable_layer_norm": False, "conv_bias": False},
    "large": {"feat_extract_norm": "layer", "do_stable_layer_norm": True, "conv_bias": True},
}


def tiny_config(variant: str) -> dict:
    return {
        "architectures": ["Wav2Vec2ForCTC"],
        "model_type": "wav2vec2",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "hidden_act": "gelu",
        "feat_extract_activation": "gelu",
        "conv_dim": [16, 16, 16],
        "conv_kernel": [10, 3, 2],
        "conv_stride": [5, 2, 2],
        "num_conv_pos_embeddings": 8,
        "num_conv_pos_embedding_groups": 4,
        "layer_norm_eps": 1e-5,
        "vocab_size": len(VOCAB),
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "mask_time_prob": 0.05,
        "ctc_loss_reduction": "mean",
        "word_delimiter_token": "|",
        **VARIANTS[variant],
    }


def build_tiny_ctc(path: Path, variant: str = "base", seed: int = 0, **sizes: object) -> Path:
    """Write the checkpoint into `path` (created) and return it; `sizes` override config.json's sizes."""
    path.mkdir(parents=True, exist_ok=True)
    config = tiny_config(variant) | sizes
    module = Wav2Vec2ForCTC(Wav2Vec2Config.from_dict(config))
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    for name, tensor in sorted(module.state_dict().items()):
        shape = tuple(tensor.shape)
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith("bias"):
            value = 0.1 * rng.standard_normal(shape)
        else:
            fan_in = int(np.prod(shape[1:])) or 1
            value = rng.standard_normal(shape) / np.sqrt(fan_in)
        tensors[name] = value.astype(np.float32)
    v = tensors.pop("wav2vec2.encoder.pos_conv_embed.conv.weight")
    prefix = "wav2vec2.encoder.pos_conv_embed.conv.parametrizations.weight."
    tensors[prefix + "original1"] = v
    tensors[prefix + "original0"] = (0.5 + rng.random((1, 1, v.shape[2]))).astype(np.float32)
    tensors["wav2vec2.masked_spec_embed"] = rng.random(config["hidden_size"]).astype(np.float32)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config, indent=1))
    (path / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(VOCAB)}))
    (path / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "Wav2Vec2FeatureExtractor", "sampling_rate": 16000, "do_normalize": True,
        "feature_size": 1, "padding_side": "right", "padding_value": 0.0, "return_attention_mask": False,
    }))
    return path


def golden_input(seconds: float = 0.25, seed: int = 1) -> np.ndarray:
    """A fixed waveform at 16 kHz: a chirp with noise."""
    t = np.arange(int(16000 * seconds)) / 16000
    rng = np.random.default_rng(seed)
    return (0.5 * np.sin(2 * np.pi * (200 + 800 * t) * t) + 0.05 * rng.standard_normal(len(t))).astype(np.float32)


if __name__ == "__main__":
    import sys

    torch.manual_seed(0)
    print(build_tiny_ctc(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "base"))
