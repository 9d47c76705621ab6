"""Build the tiny AuK checkpoints (assembled bundle layout) from the published configs with the sizes shrunk.

`python tests/goldens/auk/make_tiny.py` writes tests/goldens/auk/tiny (base) and tiny-flash. Structural flags of the
real variants are kept (causal VAE, attention masks, 10+20 -> 2+2 blocks, the real hop of 480 and 128 mel bins);
the audio tower's window is shrunk (n_window 4) so a one-second clip spans many windows. Weights are random (seeded).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

HERE = Path(__file__).parent
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>", "<|endoftext|>"]


def tokenizer() -> Tokenizer:
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    return tok


def config(tok: Tokenizer, variant: str) -> dict:
    return {
        "architectures": ["AuKForConditionalGeneration"],
        "model_type": "auk",
        "thinker_config": {
            "model_type": "qwen2_5_omni_thinker",
            "audio_token_index": tok.token_to_id("<|AUDIO|>"),
            "audio_start_token_id": tok.token_to_id("<|audio_bos|>"),
            "audio_end_token_id": tok.token_to_id("<|audio_eos|>"),
            "text_config": {
                "vocab_size": tok.get_vocab_size(), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
                "max_position_embeddings": 4096,
            },
            "audio_config": {
                "num_mel_bins": 128, "d_model": 32, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 64,
                "max_source_positions": 64, "n_window": 4, "output_dim": 32, "activation_function": "gelu", "scale_embedding": False,
            },
        },
        "dit": {"dim": 64, "heads": 4, "dim_head": 16, "ff_mult": 2, "text_hidden_dim": 32, "num_layers": 2, "num_single_layers": 2,
                "attn_mask_enabled": True},
        "vae": {"latent_dim": 8, "downsample_rate": 480, "target_sample_rate": 24000, "model_init_kwargs": {
            "upsample_rates": [5, 4, 3, 2, 2, 2], "upsample_kernel_sizes": [10, 8, 6, 4, 4, 4], "upsample_initial_channel": 128,
            "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3, 5]],
            "downsample_rates": [2, 2, 2, 3, 4, 5], "downsample_channels": [4, 4, 8, 8, 8, 16, 16],
            "latent_dim": 8, "use_vae": True, "causal": True, "act_causal": True, "flow_hidden_channels": 16}},
        "variant": variant,
        "flash_t_grid": [0.0, 0.07612049579620361, 0.2928932309150696, 0.6173166036605835, 1.0],
        "defaults": {"nfe": 32, "cfg": 2.0, "sway": -1.0},
    }


def randomized(module: torch.nn.Module, prefix: str, generator: torch.Generator) -> dict[str, torch.Tensor]:
    out = {}
    for name, tensor in module.state_dict().items():
        if name.endswith("filter") or name == "rotary_embed.inv_freq":
            out[prefix + name] = tensor.clone()
            continue
        noise = torch.randn(tensor.shape, generator=generator) * (0.3 if tensor.dim() <= 1 else 0.2)
        base = torch.ones_like(tensor) if tensor.dim() == 1 and ("norm" in name or name.endswith("scale")) else 0
        out[prefix + name] = (base + noise).contiguous()
    return out


def weight_normed(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every convolution of the VAE as the published file stores it: weight-normed (`weight_g`, `weight_v`)."""
    out = {}
    for name, tensor in weights.items():
        if name.endswith(".weight") and tensor.dim() == 3:
            prefix = name[: -len("weight")]
            # Near-unit-gain convolutions, and a quiet last one, so that the audio stays mostly inside the clamp.
            out[prefix + "weight_g"] = torch.full((tensor.shape[0], 1, 1), 0.01 if prefix == "conv_post." else 0.9)
            out[prefix + "weight_v"] = tensor
        else:
            out[name] = tensor
    return out


def flow_tensors(channels: int, hidden: int, generator: torch.Generator, layers: int = 4, flows: int = 4) -> dict[str, torch.Tensor]:
    """The VAE's normalising flow (training-only, never built here), with the published names and shapes."""
    half = channels // 2
    shapes: dict[str, tuple[int, ...]] = {}
    for f in range(0, 2 * flows, 2):
        base = f"flow.flows.{f}."
        shapes |= {base + "pre.weight": (hidden, half, 1), base + "pre.bias": (hidden,), base + "post.weight": (half, hidden, 1), base + "post.bias": (half,)}
        for i in range(layers):
            res = 2 * hidden if i < layers - 1 else hidden
            shapes |= {f"{base}enc.in_layers.{i}.weight_g": (2 * hidden, 1, 1), f"{base}enc.in_layers.{i}.weight_v": (2 * hidden, hidden, 5),
                       f"{base}enc.in_layers.{i}.bias": (2 * hidden,), f"{base}enc.res_skip_layers.{i}.weight_g": (res, 1, 1),
                       f"{base}enc.res_skip_layers.{i}.weight_v": (res, hidden, 1), f"{base}enc.res_skip_layers.{i}.bias": (res,)}
    return {name: torch.randn(shape, generator=generator) * 0.1 for name, shape in shapes.items()}


def share(out: Path, base: Path) -> None:
    """AuK-Flash's bundle holds the same Qwen snapshot and VAE as the base one: link them, as the bundle does."""
    for name in ("model.safetensors", "vae.safetensors", "tokenizer.json"):
        (out / name).unlink()
        (out / name).symlink_to(Path("..") / base.name / name)


def build(out: Path, variant: str, seed: int) -> None:
    from vocalis.stages.models.auk.config import AuKConfig
    from vocalis.stages.models.auk.dit import AuKDiT
    from vocalis.stages.models.auk.encoder import ConditionEncoder
    from vocalis.stages.models.auk.vae import AuKVAE

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tok = tokenizer()
    tok.save(str(out / "tokenizer.json"))
    data = config(tok, variant)
    (out / "config.json").write_text(json.dumps(data, indent=2) + "\n")
    cfg = AuKConfig.from_dict(data)
    generator = torch.Generator().manual_seed(seed)
    encoder = randomized(ConditionEncoder(cfg.text, cfg.audio), "", generator)
    qwen = {k: v for k, v in encoder.items() if k.startswith("thinker.")}
    qwen["thinker.lm_head.weight"] = torch.randn(cfg.text.vocab_size, cfg.text.hidden_size, generator=generator)
    qwen["thinker.audio_tower.audio_bos_eos_token.weight"] = torch.randn(2, cfg.audio.output_dim, generator=generator)
    save_file(qwen, str(out / "model.safetensors"))
    dit = randomized(AuKDiT(cfg.dit, cfg.vae.latent_dim), "transformer.", generator)
    dit["layer_weights"] = torch.randn(cfg.text.num_hidden_layers, generator=generator)
    dit["layer_scale"] = torch.tensor([1.5])
    save_file(dit, str(out / f"auk_{variant}.safetensors"))
    (out / "auk.safetensors").symlink_to(f"auk_{variant}.safetensors")
    vae = randomized(AuKVAE(cfg.vae), "", generator)
    vae["global_log_std"] = vae["global_log_std"].abs() + 0.5
    vae = weight_normed(vae) | flow_tensors(cfg.vae.latent_dim, cfg.vae.flow_hidden_channels, generator)
    save_file(vae, str(out / "vae.safetensors"))


if __name__ == "__main__":
    build(HERE / "tiny", "base", 0)
    build(HERE / "tiny-flash", "flash", 1)
    share(HERE / "tiny-flash", HERE / "tiny")
