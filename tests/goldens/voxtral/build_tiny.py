"""Builds a tiny Voxtral TTS checkpoint in the published layout: params.json (the published schema and structure,
widths shrunk), consolidated.safetensors (every published tensor name, seeded random weights, weight-normalised
convs as parametrizations.weight.original0/1), tekken.json (tekken_tiny.json) and voice_embedding/<name>.pt.

Kept from the published params.json: 3 flow layers, the 4:1 GQA ratios, 36 acoustic codebooks of 21 levels, the codec's
patch 240 and strides 1·2·2·2 (1920 samples per frame at 24 kHz), window 16 halved by the (absent) encoder's three
downsamplings, layer scale, q/k-norm, and the codebook/special-token layout. The semantic head's [END_AUDIO] row is
zeroed unless `stopping` is set, so that utterance lengths are max_new_tokens (a random head would stop at random).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

HERE = Path(__file__).parent
VOICES = {"casual_male": 1, "neutral_female": 3, "neutral_male": 4, "fr_female": 12}
"""Preset -> its index in params.json, in the published voice map's style (tekken.json gives their row counts)."""

PARAMS = {
    "dim": 64, "n_layers": 2, "head_dim": 16, "hidden_dim": 128, "n_heads": 4, "n_kv_heads": 1,
    "rope_theta": 1000000.0, "norm_eps": 1e-05, "vocab_size": 4000, "max_seq_len": 4096, "max_position_embeddings": 4096,
    "model_type": "voxtral_tts",
    "multimodal": {
        "bos_token_id": 1,
        "audio_model_args": {
            "semantic_codebook_size": 64, "acoustic_codebook_size": 21, "n_acoustic_codebook": 36,
            "audio_encoding_args": {"codebook_pattern": "parallel", "interleave_audio_tokens_per_segment": 8192,
                                    "interleave_text_tokens_per_segment": 8192, "single_trailing_segment": False,
                                    "num_codebooks": 37, "sampling_rate": 24000, "frame_rate": 12.5},
            "audio_token_id": 24, "begin_audio_token_id": 25, "input_embedding_concat_type": "sum",
            "acoustic_transformer_args": {"input_dim": 64, "dim": 64, "n_layers": 3, "head_dim": 16, "hidden_dim": 128,
                                          "n_heads": 4, "n_kv_heads": 1, "use_biases": False, "rope_theta": 10000.0,
                                          "sigma": 1e-05, "sigma_max": 1.0},
            "p_uncond": 0.0, "text_feature_bugged": False, "condition_dropped_token_id": 42,
        },
        "audio_tokenizer_args": {
            "channels": 1, "sampling_rate": 24000, "pretransform_patch_size": 240, "patch_proj_kernel_size": 7,
            "semantic_codebook_size": 64, "semantic_dim": 16, "acoustic_codebook_size": 21, "acoustic_dim": 36,
            "conv_weight_norm": True, "causal": True, "attn_sliding_window_size": 16, "half_attn_window_upon_downsampling": True,
            "dim": 32, "hidden_dim": 64, "head_dim": 8, "n_heads": 4, "n_kv_heads": 4, "qk_norm_eps": 1e-06, "qk_norm": True,
            "use_biases": False, "norm_eps": 0.01, "layer_scale": True, "layer_scale_init": 0.01,
            "decoder_transformer_lengths_str": "2,2,2,2", "decoder_convs_kernels_str": "3,4,4,4",
            "decoder_convs_strides_str": "1,2,2,2", "voice": VOICES,
        },
    },
}


def random_tensor(name: str, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(shape, generator=generator)
    if name.endswith(("norm.weight", "_scale")) or name.endswith("original0"):
        return 1.0 + 0.2 * noise
    if name.endswith("cluster_usage"):
        return torch.rand(shape, generator=generator) * 2 + 0.5
    if name.endswith(("embedding_sum", "embeddings.weight")):
        return noise
    return noise / max(1, shape[-1] if len(shape) == 2 else shape[1] * shape[2]) ** 0.5


def build(path: Path, *, seed: int = 0, stopping: bool = False, encoder: bool = False) -> Path:
    """The tiny checkpoint at `path` (created); `encoder` adds the audio tokenizer's encoder (a cloning-capable layout,
    which no published checkpoint has)."""
    from vocalis.stages.models.voxtral.config import VoxtralConfig
    from vocalis.stages.models.voxtral.weights import checkpoint_shapes

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "params.json").write_text(json.dumps(PARAMS, indent=2))
    shutil.copy(HERE / "tekken_tiny.json", path / "tekken.json")
    config = VoxtralConfig.from_dict(PARAMS)
    generator = torch.Generator().manual_seed(seed)
    shapes = checkpoint_shapes(config, encoder=encoder)
    weights = {name: random_tensor(name, shape, generator) for name, shape in sorted(shapes.items())}
    weights["audio_tokenizer.output_proj.conv.parametrizations.weight.original0"] *= 0.1  # audio within [-1, 1]
    if not stopping:
        weights["acoustic_transformer.semantic_codebook_output.weight"][1] = 0.0
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()}, str(path / "consolidated.safetensors"))
    tekken = json.loads((HERE / "tekken_tiny.json").read_text())
    (path / "voice_embedding").mkdir(exist_ok=True)
    for name in VOICES:
        rows = tekken["audio"]["voice_num_audio_tokens"][name]
        torch.save(torch.randn(rows, PARAMS["dim"], generator=generator).to(torch.bfloat16), path / "voice_embedding" / f"{name}.pt")
    return path


if __name__ == "__main__":
    import sys

    print(build(Path(sys.argv[1])))
