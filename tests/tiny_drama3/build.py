"""A tiny Fish Audio Drama 3 checkpoint in the published layout (config.json `fish_omni`, model.safetensors with
FP8 experts, tokenizer.json), plus S2 Pro's tiny DAC (codec.pth + codec_config.json) beside it.

The backbone and lm_head are tests/goldens/drama3's (checked against transformers `qwen3_5_moe` there, FP8 experts
and all); the codebook decoder's tensors are random (seeded) under their published names, two shared enrichment
layers instead of four and the published nine per-codebook layers (ten codebooks, the codec's). The tokenizer is a
byte-level BPE with Drama 3's structural tokens, all sixteen speaker tags and a 64-token semantic band (the tiny
codec's semantic codebook).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = ROOT / "goldens" / "drama3"
FISH_TINY = ROOT / "goldens" / "fish_speech" / "tiny"
MOE_CONFIG = ROOT / "goldens" / "qwen3_5_moe" / "config.json"

VOCAB = 400
SEMANTIC_START = 320
CODEBOOK_SIZE = 64
NUM_CODEBOOKS = 10
STRUCTURAL = ["<|im_start|>", "<|im_end|>", "<|voice|>", "<|text|>", "<|interleave|>"]
SPEAKERS = [f"<|speaker:{i}|>" for i in range(16)]
CORPUS = ["Hello world, this is a tiny voice.", "The quick brown fox jumps over the lazy dog.",
          "convert the provided text to speech reference to the following:", "[Reference 1]\nText: \nSpeech: ",
          "system\nuser\nassistant\n", "<whisper> quietly </whisper> [sighs] [laughs] good morning."]
DECODER = {
    "model_type": "fish_qwen3_audio_decoder", "decoder_type": "codebook_mtp_shared",
    "dim": 32, "text_dim": 32, "n_head": 4, "n_local_heads": 2, "head_dim": 16, "n_layer": 2, "shared_enrichment_layers": 2,
    "intermediate_size": 48, "norm_eps": 1e-6, "num_codebooks": NUM_CODEBOOKS, "vocab_size": CODEBOOK_SIZE,
    "max_seq_len": NUM_CODEBOOKS + 1, "rope_base": 10000.0, "rotary_percent": 0.5, "rotary_interleaved": True,
    "attention_output_gate": True, "attention_qk_norm": True, "layernorm_zero_centered_gamma": True,
    "vq_feature_scope": "all_vq", "vq_feature_placement": "mtp_shared_pre", "vq_backbone_codebooks": 0,
}


def text_config() -> dict:
    config = json.loads(MOE_CONFIG.read_text())  # tests/goldens/qwen3_5_moe: the backbone's structure
    layers = config["num_hidden_layers"]
    return {**config, "model_type": "fish_omni_text", "vocab_size": VOCAB, "mlp_layer_types": ["moe"] * layers,
            "use_qk_norm": True, "attn_output_gate": True, "layernorm_zero_centered_gamma": True,
            "rotary_interleaved": False, "shared_expert_gate": True}


def make_tokenizer(path: Path) -> dict[str, int]:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=290, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in STRUCTURAL + SPEAKERS])
    filler = [f"<|reserved_{i}|>" for i in range(SEMANTIC_START - tokenizer.get_vocab_size())]
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in filler])
    tokenizer.add_special_tokens([AddedToken(f"<|semantic:{i}|>", special=True) for i in range(CODEBOOK_SIZE)])
    assert tokenizer.token_to_id("<|semantic:0|>") == SEMANTIC_START and tokenizer.get_vocab_size() <= VOCAB
    tokenizer.save(str(path / "tokenizer.json"))
    return {t: tokenizer.token_to_id(t) for t in STRUCTURAL}


def decoder_tensors(generator: torch.Generator, c: dict = DECODER) -> dict[str, torch.Tensor]:
    dim, heads, kv, hd, inter = c["dim"], c["n_head"], c["n_local_heads"], c["head_dim"], c["intermediate_size"]

    def rand(*shape: int, gain: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * gain / shape[-1] ** 0.5

    def norm(n: int) -> torch.Tensor:  # zero-centred gammas, away from their initial zeros
        return torch.randn(n, generator=generator) * 0.2

    out = {"audio_decoder.codebook_embeddings.weight": torch.randn(c["num_codebooks"] * c["vocab_size"], dim, generator=generator)}
    layers = [("audio_decoder_mtp_shared", i, "semantic_embedding") for i in range(c["shared_enrichment_layers"])]
    layers += [("audio_decoder_mtp", j, "codebook_embedding") for j in range(c["num_codebooks"] - 1)]
    for group, i, embedding in layers:
        p = f"{group}.layers.{i}."
        out[p + f"{embedding}.weight"] = torch.randn(c["vocab_size"], dim, generator=generator)
        out[p + "enorm.weight"], out[p + "hnorm.weight"] = norm(dim), norm(dim)
        out[p + "eh_proj.weight"] = rand(dim, 2 * dim, gain=1.5)
        out[p + "transformer_layer.attention.wqkv.weight"] = rand(2 * heads * hd + 2 * kv * hd, dim, gain=1.5)
        out[p + "transformer_layer.attention.wo.weight"] = rand(dim, heads * hd, gain=1.5)
        out[p + "transformer_layer.attention.q_norm.weight"], out[p + "transformer_layer.attention.k_norm.weight"] = norm(hd), norm(hd)
        out[p + "transformer_layer.attention_norm.weight"] = norm(dim)
        out[p + "transformer_layer.ffn_norm.weight"] = norm(dim)
        out[p + "transformer_layer.feed_forward.w1.weight"] = rand(inter, dim, gain=1.5)
        out[p + "transformer_layer.feed_forward.w3.weight"] = rand(inter, dim, gain=1.5)
        out[p + "transformer_layer.feed_forward.w2.weight"] = rand(dim, inter, gain=1.5)
        out[p + "final_layernorm.weight"] = norm(dim)
    for j in range(c["num_codebooks"] - 1):
        out[f"audio_decoder_mtp.heads.{j}.weight"] = rand(c["vocab_size"], dim, gain=3.0)
    return out


def config_json(eos: int, **overrides) -> dict:
    return {
        "model_type": "fish_omni", "architectures": ["FishOmniModel"], "fish_schema_version": 1,
        "speech_template_version": "reference-bracket-v1", "text_config": text_config(), "audio_decoder_config": DECODER,
        "semantic_start_token_id": SEMANTIC_START, "semantic_end_token_id": SEMANTIC_START + CODEBOOK_SIZE - 1,
        "eos_token_id": eos, "quantization_config": {"quant_method": "bsgemm-moe", "activation_scheme": "dynamic",
                                                     "weight_block_size": [128, 128]}, **overrides,
    }


def build_checkpoint(path: Path, seed: int = 11, with_codec: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    ids = make_tokenizer(path)
    (path / "config.json").write_text(json.dumps(config_json(ids["<|im_end|>"]), indent=2))
    weights = {k: v for k, v in load_file(str(GOLDENS / "goldens.safetensors")).items() if not k.startswith("golden.")}
    weights |= decoder_tensors(torch.Generator().manual_seed(seed))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"))
    if with_codec:
        for name in ("codec.pth", "codec_config.json"):
            shutil.copy(FISH_TINY / name, path / name)
    return path


if __name__ == "__main__":
    print(build_checkpoint(Path(sys.argv[1])))
