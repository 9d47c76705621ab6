"""Record transformers' `qwen3_5_moe` backbone as Fish Audio Drama 3 publishes it: FP8 routed experts, untied lm_head.

Run by hand in the reference venv (transformers >= 5.3 and torch 2.13 CPU; never in CI):

    /work/refvenv/tf/bin/python tests/goldens/drama3/make_goldens.py

The model is tests/goldens/qwen3_5_moe's (its config and `randomise`, reused) with the text vocabulary grown to hold
Drama 3's tiny tokenizer and semantic band. Before recording, every routed expert matrix is quantised to
float8_e4m3fn with one float32 `weight_scale_inv` per [128, 128] block (the `bsgemm-moe` layout) and the model runs
on the dequantised values, so the file's FP8 tensors are exactly what was checked. It writes goldens.safetensors
beside itself: the backbone under `model.language_model.*` with experts one by one (`experts.<e>.{gate,up,down}_proj.
weight` + `.weight_scale_inv`), `lm_head.weight`, the input ids, and the full-vocabulary logits of one dense forward
and of a cached run (a prefill of PREFIX ids, then one id at a time).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import Qwen3_5MoeTextConfig, Qwen3_5MoeTextModel
from transformers.cache_utils import DynamicCache

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "qwen3_5_moe"))
from make_goldens import CONFIG as MOE_CONFIG  # noqa: E402
from make_goldens import LENGTH, PREFIX, randomise  # noqa: E402

SEED = 2610
VOCAB = 400
CONFIG = {**MOE_CONFIG, "vocab_size": VOCAB}
BLOCK = 128
FP8_MAX = 448.0


def fp8_round_trip(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, scale_inv, dequantised) of a matrix no larger than one block in either dimension... or larger."""
    rows, cols = weight.shape
    blocks_r, blocks_c = -(-rows // BLOCK), -(-cols // BLOCK)
    scale = torch.empty(blocks_r, blocks_c)
    codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(blocks_r):
        for j in range(blocks_c):
            part = weight[i * BLOCK : (i + 1) * BLOCK, j * BLOCK : (j + 1) * BLOCK]
            scale[i, j] = part.abs().max().clamp(min=1e-12) / FP8_MAX
            codes[i * BLOCK : (i + 1) * BLOCK, j * BLOCK : (j + 1) * BLOCK] = (part / scale[i, j]).to(torch.float8_e4m3fn)
    full = scale.repeat_interleave(BLOCK, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]
    return codes, scale, codes.float() * full


def main() -> None:
    torch.manual_seed(SEED)
    config = Qwen3_5MoeTextConfig(**CONFIG)
    model = Qwen3_5MoeTextModel(config).eval()
    randomise(model)
    lm_head = torch.randn(VOCAB, CONFIG["hidden_size"]) * CONFIG["hidden_size"] ** -0.5
    tensors: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for layer_index, layer in enumerate(model.layers):
            experts = layer.mlp.experts
            prefix = f"model.language_model.layers.{layer_index}.mlp.experts"
            for e in range(experts.gate_up_proj.shape[0]):
                gate, up = experts.gate_up_proj[e].chunk(2)
                parts = {"gate_proj": gate, "up_proj": up, "down_proj": experts.down_proj[e]}
                for part, weight in parts.items():
                    codes, scale, value = fp8_round_trip(weight)
                    tensors[f"{prefix}.{e}.{part}.weight"] = codes
                    tensors[f"{prefix}.{e}.{part}.weight_scale_inv"] = scale
                    weight.copy_(value)  # a view of the fused parameter: the model now runs on what the file holds
    ids = torch.randint(0, VOCAB, (1, LENGTH), generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad():
        dense = model(input_ids=ids).last_hidden_state[0] @ lm_head.T
        cache = DynamicCache(config=config)
        steps = [model(input_ids=ids[:, :PREFIX], cache=cache, use_cache=True).last_hidden_state[0]]
        for i in range(PREFIX, LENGTH):
            steps.append(model(input_ids=ids[:, i : i + 1], cache=cache, use_cache=True).last_hidden_state[0])
    cached = torch.cat(steps) @ lm_head.T
    for name, tensor in model.state_dict().items():
        if not name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            tensors[f"model.language_model.{name}"] = tensor.detach().contiguous()
    tensors |= {"lm_head.weight": lm_head, "golden.ids": ids[0], "golden.logits": dense.contiguous(),
                "golden.cached_logits": cached.contiguous()}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(HERE / "goldens.safetensors"))
    print("dense vs cached max diff", (dense - cached).abs().max().item())


if __name__ == "__main__":
    main()
