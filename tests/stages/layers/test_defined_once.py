"""Each generic block is defined once, in the shared floor: no family (nor the tiny test family) defines its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FAMILY_FILES = sorted((ROOT / "stages" / "models").rglob("*.py")) + sorted((ROOT / "tests" / "tiny_tts").glob("*.py"))
SHARED = {
    "RMSNorm", "LayerNorm", "GatedMLP", "MLP", "Attention", "QKVAttention", "DenseAttention", "DecoderLayer", "LayerScale",
    "RotaryEmbedding", "LongRoPE", "rotary", "rope", "rotate", "rotate_half", "apply_rope", "apply_rotary", "causal_mask",
    "Snake", "Snake1d", "SnakeBeta", "CausalConv", "CausalConv1d", "CausalTransposeConv", "CausalConvTranspose1d",
    "ResidualUnit", "HalfSnake", "GatedDeltaNet", "GatedRMSNorm", "HybridDecoder", "HybridDecoderLayer", "SparseMoE", "Experts",
    "RecurrentStates", "fold_weight_norm", "load_strict", "load_into", "load_weights", "read_safetensors", "take", "_build",
}


def test_no_family_defines_a_shared_block():
    assert FAMILY_FILES
    copies = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path in FAMILY_FILES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in SHARED
    ]
    assert not copies, f"use vocalis.stages.layers / audio_blocks / weights instead of: {copies}"
