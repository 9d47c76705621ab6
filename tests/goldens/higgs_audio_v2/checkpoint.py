"""The tiny higgs-audio v2 checkpoint directories the tests serve, in both published vocabularies.

`native(dst)`: tiny/ (written by make_goldens.py) with the tiny Higgs Audio v2 tokenizer of the OmniVoice goldens
as its `audio_tokenizer/`. `boson(dst)`: the same weights written in Boson's original layout (model_type
"higgs_audio", the backbone under `text_config`, Boson's tensor names, its token embedding saved as a frozen and a
trainable part, and its text head, which the talker does not use).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny"
CODEC = HERE.parent / "omnivoice" / "tiny" / "audio_tokenizer"
NATIVE_TO_BOSON = (
    ("model.embed_audio_tokens.embed_audio_tokens.", "audio_codebook_embeddings."),
    ("audio_lm_head.", "audio_decoder_proj.audio_lm_head."),
    ("text_lm_head.", "audio_decoder_proj.text_lm_head."),
    ("model.", ""),
)


def native(dst: Path) -> Path:
    if not dst.exists():
        shutil.copytree(TINY, dst)
        shutil.copytree(CODEC, dst / "audio_tokenizer")
    return dst


def boson_name(name: str) -> str:
    for old, new in NATIVE_TO_BOSON:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def boson(dst: Path) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    if dst.exists():
        return dst
    native(dst)
    weights = {boson_name(k): v for k, v in load_file(str(dst / "model.safetensors")).items()}
    config = json.loads((dst / "config.json").read_text())
    weights["audio_decoder_proj.text_lm_head.weight"] = torch.randn(config["vocab_size"], config["hidden_size"])
    # as Boson's training saved it: the pretrained rows frozen, the added special tokens' rows trainable
    embed = weights.pop("embed_tokens.weight")
    weights["embed_tokens.embedding_frozen.weight"] = embed[:-8].clone()
    weights["embed_tokens.embedding_trainable.weight"] = embed[-8:].clone()
    save_file(weights, str(dst / "model.safetensors"))
    text_keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings", "hidden_act")
    rope = config["rope_parameters"]
    text_config = {k: config[k] for k in text_keys if k in config} | {
        "model_type": "llama", "rope_theta": rope["rope_theta"],
        "rope_scaling": {k: v for k, v in rope.items() if k != "rope_theta"},
    }
    boson_config = {
        "model_type": "higgs_audio", "architectures": ["HiggsAudioModel"], "text_config": text_config,
        "audio_adapter_type": "dual_ffn_fast_forward", "audio_dual_ffn_layers": list(range(config["num_hidden_layers"])),
        "audio_num_codebooks": config["num_codebooks"], "audio_codebook_size": config["codebook_size"] - 2,
        "audio_stream_bos_id": config["audio_stream_bos_id"], "audio_stream_eos_id": config["audio_stream_eos_id"],
        "audio_out_token_idx": config["audio_token_id"], "audio_out_bos_token_id": config["audio_bos_token_id"],
        "use_delay_pattern": True, "skip_audio_tower": True, "encode_whisper_embed": False, "audio_embed_avg": False,
        "use_audio_out_self_attention": False, "use_audio_out_embed_projector": False,
    }
    (dst / "config.json").write_text(json.dumps(boson_config, indent=2) + "\n")
    return dst
