"""Load a `higgs_audio_v2_tokenizer` directory (`config.json` + `model.safetensors`) strictly.

Every tensor in the file must be used or be one the tokenizer knowingly has no use for at inference (training-only
parts); weight-normed tensors, in either form PyTorch writes, are folded.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.components.higgs_audio_v2_tokenizer.config import AudioTokenizerConfig
from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
from vocalis.stages.layers.weights import fold_weight_norm, load_strict, read_safetensors

CODEC_UNUSED = (
    r"decoder_semantic\..*",  # reconstructs semantic features: training only
    r"fc1\..*",  # likewise
    r"quantizer\.quantizers\.\d+\.codebook\.(embed_avg|cluster_size|inited)",  # codebook EMA statistics
    r"semantic_model\.masked_spec_embed",  # SpecAugment, training only
)
"""Tensors of the published file that inference has no use for, by design."""


def load_audio_tokenizer(path: Path, config: AudioTokenizerConfig | None = None) -> AudioTokenizer:
    """The tokenizer of directory `path` (float32, CPU, eval mode)."""
    codec = AudioTokenizer(config or AudioTokenizerConfig.from_dir(path))
    weights = fold_weight_norm(read_safetensors(path / "model.safetensors"))
    load_strict(codec, weights, path, unused=CODEC_UNUSED)
    return codec.eval()
