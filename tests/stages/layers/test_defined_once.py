"""Each generic block is defined once, in the shared floor (layers/, components/): no family (nor the tiny template
family) defines its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FAMILY_FILES = sorted((ROOT / "stages" / "models").rglob("*.py"))
SHARED = {
    "RMSNorm", "LayerNorm", "GatedMLP", "SwiGLU", "MLP", "Attention", "QKVAttention", "DenseAttention", "DecoderLayer", "LayerScale",
    "RotaryEmbedding", "LongRoPE", "rotary", "rope", "rotate", "rotate_half", "apply_rope", "apply_rotary", "causal_mask",
    "Snake", "Snake1d", "SnakeBeta", "CausalConv", "CausalConv1d", "CausalTransposeConv", "CausalConvTranspose1d",
    "ResidualUnit", "HalfSnake", "GatedDeltaNet", "GatedRMSNorm", "HybridDecoder", "HybridDecoderLayer", "SparseMoE", "Experts",
    "RecurrentStates", "fold_weight_norm", "load_strict", "load_into", "load_weights", "read_safetensors", "take", "_build",
    # the mel filterbank and the log-mel features (components/speech_features.py)
    "mel_filters", "slaney_mel_filters", "log_mel", "whisper_log_mel", "matcha_log_mel", "kaldi_fbank", "_hz_to_mel",
    "_mel_to_hz", "_hz_to_mel_slaney", "_mel_to_hz_slaney", "hz_to_mel", "mel_to_hz",
    # adaLN modulation and the F5-TTS position convolutions (components/flow_dit.py)
    "AdaLayerNorm", "AdaLayerNormFinal", "AdaLayerNormZero", "AdaLayerNormZeroFinal", "ConvPositionEmbedding",
    "CausalConvPositionEmbedding",
    # the stateful codec decoder (components/stateful_decode.py)
    "StatefulCodecDecoder", "CodecDecoderModel", "CodecDecoder", "NanoCodecDecoder", "decode_windows",
    # config readers (api/config_json.py's from_json; a family's entry point is <Config>.from_dir)
    "from_json", "_pick", "_int", "_number", "parse_config", "load_config", "read_config", "from_params", "from_dicts",
}


def test_no_family_defines_a_shared_block():
    assert FAMILY_FILES
    copies = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path in FAMILY_FILES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in SHARED
    ]
    assert not copies, f"use vocalis.stages.layers / components instead of: {copies}"


def test_no_family_decodes_codec_windows_itself():
    """A codec that streams from a per-request state is served by `StatefulCodecDecoder`, not a family's own
    ChunkDecoder around `decode_windows`."""
    callers = [str(path.relative_to(ROOT)) for path in FAMILY_FILES if "decode_windows" in path.read_text()]
    assert not callers, f"use StatefulCodecDecoder instead of decode_windows in: {callers}"
