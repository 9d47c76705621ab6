"""Component goldens for the tiny Voxtral checkpoint from transformers' Mistral layers (no Voxtral TTS implementation
installs from PyPI: the only one is vLLM-Omni's, which needs CUDA vLLM).

Run in the reference venv (torch 2.13 CPU + transformers >= 5), on a checkpoint built by our venv:
    .venv/bin/python -m tests.goldens.voxtral.build_tiny /tmp/voxtral-tiny
    /work/refvenv/tf/bin/python tests/goldens/voxtral/make_goldens.py /tmp/voxtral-tiny
It writes goldens.safetensors:
- decoder: MistralModel (weights converted from Mistral's consolidated names with transformers' own wq/wk RoPE
  permutation) over the prompt embeddings of PROMPT (text rows from tok_embeddings, [AUDIO] rows from the preset's
  voice_embedding/*.pt): `decoder_inputs` [L, dim] and `decoder_hidden` [L, dim] (final norm applied);
- flow: the acoustic transformer as three MistralDecoderLayers without rotation or mask (bidirectional), integrated
  by Euler over N_STEPS with classifier-free guidance against a zeroed condition, from recorded noise: `flow_hidden`
  [B, dim] (decoder states), `flow_noise` [B, 36], `flow_alpha` [B], `flow_velocity` [B, 36] (the first step's
  conditional velocity), `flow_values` [B, 36] (clamped to [-1, 1]), `flow_codes` [B, 36] (FSQ codes + 2).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import MistralConfig
from transformers.models.mistral.modeling_mistral import MistralDecoderLayer, MistralModel, MistralRMSNorm

HERE = Path(__file__).parent
PROMPT = json.loads((HERE / "prompt_goldens.json").read_text())["cases"][0]
N_STEPS = 7
LEVELS = 21


def permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """transformers' convert_mistral_weights_to_hf permutation (interleaved RoPE pairs -> rotate-half halves)."""
    dim1, dim2 = w.shape
    return w.view(heads, dim1 // heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def layer_state(weights: dict, prefix: str, heads: int | None, kv_heads: int | None) -> dict:
    q, k = weights[f"{prefix}attention.wq.weight"], weights[f"{prefix}attention.wk.weight"]
    return {
        "self_attn.q_proj.weight": permute(q, heads) if heads else q,
        "self_attn.k_proj.weight": permute(k, kv_heads) if kv_heads else k,
        "self_attn.v_proj.weight": weights[f"{prefix}attention.wv.weight"],
        "self_attn.o_proj.weight": weights[f"{prefix}attention.wo.weight"],
        "mlp.gate_proj.weight": weights[f"{prefix}feed_forward.w1.weight"],
        "mlp.up_proj.weight": weights[f"{prefix}feed_forward.w3.weight"],
        "mlp.down_proj.weight": weights[f"{prefix}feed_forward.w2.weight"],
        "input_layernorm.weight": weights[f"{prefix}attention_norm.weight"],
        "post_attention_layernorm.weight": weights[f"{prefix}ffn_norm.weight"],
    }


def mistral_config(args: dict, layers: int, vocab: int) -> MistralConfig:
    config = MistralConfig(hidden_size=args["dim"], intermediate_size=args["hidden_dim"], num_hidden_layers=layers,
                           num_attention_heads=args["n_heads"], num_key_value_heads=args["n_kv_heads"], head_dim=args["head_dim"],
                           rms_norm_eps=args.get("norm_eps", 1e-5), rope_theta=args.get("rope_theta", 1e6), vocab_size=vocab,
                           max_position_embeddings=4096, sliding_window=None, tie_word_embeddings=True)
    config._attn_implementation = "eager"
    return config


def decoder_goldens(params: dict, weights: dict, path: Path) -> dict:
    model = MistralModel(mistral_config(params, params["n_layers"], params["vocab_size"])).eval()
    state = {"embed_tokens.weight": weights["mm_audio_embeddings.tok_embeddings.weight"], "norm.weight": weights["norm.weight"]}
    for i in range(params["n_layers"]):
        state |= {f"layers.{i}.{k}": v for k, v in layer_state(weights, f"layers.{i}.", params["n_heads"], params["n_kv_heads"]).items()}
    model.load_state_dict(state, strict=True)
    ids = torch.tensor(PROMPT["ids"])
    embeds = state["embed_tokens.weight"][ids].clone()
    voice = torch.load(path / "voice_embedding" / f"{PROMPT['voice']}.pt", weights_only=True).float()
    positions = (ids == params["multimodal"]["audio_model_args"]["audio_token_id"]).nonzero()[:, 0]
    embeds[positions] = voice
    with torch.no_grad():
        hidden = model(inputs_embeds=embeds[None]).last_hidden_state[0]
    return {"decoder_inputs": embeds, "decoder_hidden": hidden}


def time_embedding(t: torch.Tensor, dim: int, theta: float = 10000.0) -> torch.Tensor:
    half = dim // 2
    angles = t[:, None] * torch.exp(-math.log(theta) * torch.arange(half).float() / half)
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


def flow_modules(params: dict, weights) -> tuple[list[MistralDecoderLayer], MistralRMSNorm, dict[str, torch.Tensor]]:
    """The acoustic transformer's layers, final norm and projections (`weights[name]` read per name, in the default
    dtype; also bench/real_size_reference.py's Voxtral runner)."""
    args = params["multimodal"]["audio_model_args"]["acoustic_transformer_args"]
    config = mistral_config(args, args["n_layers"], 1)
    layers = []
    for i in range(args["n_layers"]):
        layer = MistralDecoderLayer(config, i).eval()
        layer.load_state_dict(layer_state(weights, f"acoustic_transformer.layers.{i}.", None, None), strict=True)
        layers.append(layer)
    norm = MistralRMSNorm(args["dim"], eps=config.rms_norm_eps)
    norm.load_state_dict({"weight": weights["acoustic_transformer.norm.weight"]})
    w = {name: weights[f"acoustic_transformer.{name}.weight"] for name in
         ("input_projection", "time_projection", "llm_projection", "acoustic_codebook_output", "semantic_codebook_output")}
    return layers, norm, w


def flow_sample(params: dict, layers: list, norm, w: dict, hidden: torch.Tensor, noise: torch.Tensor, alpha: torch.Tensor,
                steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values in [-1, 1], the first step's conditional velocity) of one frame per row of decoder states `hidden`:
    Euler from `noise` over `steps` with classifier-free guidance `alpha` against a zeroed condition."""
    args = params["multimodal"]["audio_model_args"]["acoustic_transformer_args"]

    def velocity(x: torch.Tensor, t_proj: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        h = torch.stack([x @ w["input_projection"].T, t_proj, condition], dim=1)
        no_rotation = (torch.ones(1, 3, args["head_dim"], dtype=h.dtype), torch.zeros(1, 3, args["head_dim"], dtype=h.dtype))
        for layer in layers:
            h = layer(h, attention_mask=None, position_embeddings=no_rotation)
        return norm(h)[:, 0] @ w["acoustic_codebook_output"].T

    b = hidden.shape[0]
    times = torch.linspace(0, 1, steps + 1)
    t_proj = time_embedding(times, args["dim"]).to(hidden.dtype) @ w["time_projection"].T
    condition = torch.cat([hidden, torch.zeros_like(hidden)]) @ w["llm_projection"].T
    x, first = noise.clone(), None
    for i in range(steps):
        v = velocity(torch.cat([x, x]), t_proj[i].expand(2 * b, -1), condition)
        first = v[:b] if first is None else first
        v = alpha[:, None] * v[:b] + (1 - alpha[:, None]) * v[b:]
        x = x + v * (times[i + 1] - times[i])
    return x.clamp(-1, 1), first


def fsq_codes(values: torch.Tensor, levels: int = LEVELS) -> torch.Tensor:
    """FSQ codes of values in [-1, 1], with the two audio specials' offset."""
    return (((values + 1) / 2) * (levels - 1)).round().long() + 2


def flow_goldens(params: dict, weights: dict, hidden: torch.Tensor) -> dict:
    layers, norm, w = flow_modules(params, weights)
    generator = torch.Generator().manual_seed(1234)
    b = hidden.shape[0]
    noise = torch.randn(b, args_n(params), generator=generator)
    alpha = torch.tensor([1.2, 0.0, 2.5])[:b]
    with torch.no_grad():
        values, first = flow_sample(params, layers, norm, w, hidden, noise, alpha, N_STEPS)
    return {"flow_hidden": hidden, "flow_noise": noise, "flow_alpha": alpha, "flow_velocity": first, "flow_values": values,
            "flow_codes": fsq_codes(values)}


def args_n(params: dict) -> int:
    return params["multimodal"]["audio_model_args"]["n_acoustic_codebook"]


def main(path: Path) -> None:
    torch.manual_seed(0)
    params = json.loads((path / "params.json").read_text())
    weights = {k: v.float() for k, v in load_file(str(path / "consolidated.safetensors")).items()}
    goldens = decoder_goldens(params, weights, path)
    goldens |= flow_goldens(params, weights, goldens["decoder_hidden"][-3:].clone())
    save_file({k: v.contiguous() for k, v in goldens.items()}, str(HERE / "goldens.safetensors"))
    print({k: tuple(v.shape) for k, v in goldens.items()})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
