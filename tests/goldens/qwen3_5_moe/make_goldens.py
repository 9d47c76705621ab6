"""Record transformers' `qwen3_5_moe` text model (Gated DeltaNet torch fallback, sparse MoE MLPs) on tiny random weights.

Run by hand in the reference venv (transformers >= 5.3 and torch 2.13 CPU; never in CI):

    /work/refvenv/tf/bin/python tests/goldens/qwen3_5_moe/make_goldens.py

It writes, beside itself:
- config.json: a `qwen3_5_moe_text` config with the published structure (three linear-attention layers then a full
  one, GQA in both, partial RoPE, value heads twice the key heads; every MLP a top-k routed MoE with a gated shared
  expert, as Fish Audio Drama 3's backbone) and every size shrunk (8 experts, top 2);
- goldens.safetensors: the weights under their published names (`model.*`, every tensor re-randomised with a seed
  so that no norm, decay or bias is at its initial value), the input ids, the hidden states of one dense forward
  over all of them (long enough for three 64-position blocks of the chunked delta rule), and the hidden states of
  a cached run: a prefill of the first PREFIX ids and then one id at a time (the recurrent decode path).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import Qwen3_5MoeTextConfig, Qwen3_5MoeTextModel
from transformers.cache_utils import DynamicCache

HERE = Path(__file__).resolve().parent
SEED = 2026
LENGTH = 90
PREFIX = 80

CONFIG = {
    "model_type": "qwen3_5_moe_text",
    "vocab_size": 96,
    "hidden_size": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 24,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "full_attention_interval": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 4,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "max_position_embeddings": 1024,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [1, 1, 0], "mrope_interleaved": True},
    "tie_word_embeddings": False,
    "attention_bias": False,
}


def randomise(model: torch.nn.Module) -> None:
    """Every tensor re-randomised (in parameter order, from the global generator) away from its initial value."""
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if name.endswith("A_log"):
                tensor.copy_(torch.empty_like(tensor).uniform_(-1.0, 1.5))
            elif name.endswith("dt_bias"):
                tensor.copy_(torch.randn_like(tensor) * 0.5)
            elif name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                tensor.copy_(torch.randn_like(tensor) * (1.5 / tensor.shape[-1] ** 0.5))
            elif name.endswith("mlp.gate.weight"):  # the router: spread, so that top-2 choices vary by token
                tensor.copy_(torch.randn_like(tensor) * 2.0)
            elif tensor.ndim == 1:  # norms: zero-centred ones around 0, gated ones around 1
                base = 1.0 if "linear_attn.norm" in name else 0.0
                tensor.copy_(base + torch.randn_like(tensor) * 0.2)
            else:
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn_like(tensor) * (1.5 / fan_in**0.5))


def main() -> None:
    torch.manual_seed(SEED)
    config = Qwen3_5MoeTextConfig(**CONFIG)
    model = Qwen3_5MoeTextModel(config).eval()
    randomise(model)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, LENGTH), generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad():
        dense = model(input_ids=ids).last_hidden_state[0]
        cache = DynamicCache(config=config)
        steps = [model(input_ids=ids[:, :PREFIX], cache=cache, use_cache=True).last_hidden_state[0]]
        for i in range(PREFIX, LENGTH):
            steps.append(model(input_ids=ids[:, i : i + 1], cache=cache, use_cache=True).last_hidden_state[0])
    tensors = {f"model.{name}": t.detach().contiguous() for name, t in model.state_dict().items()}
    tensors |= {"golden.ids": ids[0], "golden.dense": dense.contiguous(), "golden.cached": torch.cat(steps).contiguous()}
    save_file(tensors, str(HERE / "goldens.safetensors"))
    (HERE / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    print("dense vs cached max diff", (dense - torch.cat(steps)).abs().max().item())


if __name__ == "__main__":
    main()
