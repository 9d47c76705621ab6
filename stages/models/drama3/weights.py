"""Drama 3's published tensors into the modules of model.py.

- `model.language_model.*`: the Qwen3.5-MoE backbone under transformers' names, experts one by one (stacked by the
  floor's `fuse_expert_weights`, a layer at a time); with `quantization_config` bsgemm-moe the routed experts are
  float8_e4m3fn with a `weight_scale_inv` per [128, 128] block, fused and kept so (fp8_experts.py dequantises each
  at use).
- `lm_head.weight`: untied, the whole text vocabulary.
- `audio_decoder.codebook_embeddings.weight`, `audio_decoder_mtp_shared.layers.<i>.*` (shared enrichment layers),
  `audio_decoder_mtp.layers.<j>.*` and `audio_decoder_mtp.heads.<j>.weight`: the tower. Its layers use gpt-fast
  spellings inside `transformer_layer` (`attention.wqkv` holding [query | gate | key | value] rows, `attention.wo`,
  `attention.{q,k}_norm`, `attention_norm`, `ffn_norm`, `feed_forward.w1/w3/w2`), the code embedding as
  `semantic_embedding` or `codebook_embedding`, and `enorm`, `hnorm`, `eh_proj`, `final_layernorm` at layer level.
  The fused projection is split into the per-head [query, gate] layout of `QKVAttention`, and the rotary channels
  of queries and keys (and their norm weights) are permuted from pairwise-interleaved to half-split.

Loading is strict: a tensor outside these names, or a module tensor the file lacks, fails naming it, before any
tensor is read. Nothing is read whole: `load_strict` asks for one module tensor at a time, and each is read (and
fused, split, dequantised) then.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from vocalis.stages.layers.moe import fuse_expert_weights
from vocalis.stages.layers.weights import (
    DerivedWeights,
    Recipe,
    SafetensorsReader,
    build_empty,
    dtype_of,
    load_strict,
    merged,
    renamed,
    shape_of,
)
from vocalis.stages.models.drama3.block_fp8 import dequantised_growth
from vocalis.stages.models.drama3.config import FP8_BLOCK, CodebookDecoderConfig, Drama3Config
from vocalis.stages.models.drama3.fp8_experts import fuse_fp8_experts
from vocalis.stages.models.drama3.modules import Drama3

log = logging.getLogger(__name__)

_LAYER = re.compile(r"audio_decoder_mtp(_shared)?\.layers\.(\d+)\.(.+)")
_RENAMES = {
    "semantic_embedding.weight": "token_embedding.weight",
    "codebook_embedding.weight": "token_embedding.weight",
    "enorm.weight": "enorm.weight",
    "hnorm.weight": "hnorm.weight",
    "eh_proj.weight": "eh_proj.weight",
    "final_layernorm.weight": "final_layernorm.weight",
    "transformer_layer.attention.wo.weight": "self_attn.o_proj.weight",
    "transformer_layer.attention_norm.weight": "input_layernorm.weight",
    "transformer_layer.ffn_norm.weight": "post_attention_layernorm.weight",
    "transformer_layer.feed_forward.w1.weight": "mlp.gate_proj.weight",
    "transformer_layer.feed_forward.w3.weight": "mlp.up_proj.weight",
    "transformer_layer.feed_forward.w2.weight": "mlp.down_proj.weight",
}


def half_split_order(head_dim: int, rotary_dim: int) -> torch.Tensor:
    """Channel order that turns pairwise-interleaved rotary channels (2i, 2i+1) into half-split ones (i, i + r/2)."""
    return torch.cat([torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2), torch.arange(rotary_dim, head_dim)])


def _wqkv_rows(c: CodebookDecoderConfig) -> tuple[int, int]:
    """Rows of the fused projection's query (and of its gate), and of its key (and of its value)."""
    return c.n_head * c.head_dim, c.n_local_heads * c.head_dim


def split_wqkv(wqkv: torch.Tensor, c: CodebookDecoderConfig) -> dict[str, torch.Tensor]:
    order = half_split_order(c.head_dim, c.rotary_dim)
    q_rows, kv_rows = _wqkv_rows(c)
    query, gate, key, value = wqkv.split([q_rows, q_rows, kv_rows, kv_rows])
    query = query.view(c.n_head, c.head_dim, -1)[:, order]
    gate = gate.view(c.n_head, c.head_dim, -1)
    return {
        "self_attn.q_proj.weight": torch.cat([query, gate], dim=1).reshape(2 * q_rows, -1),
        "self_attn.k_proj.weight": key.view(c.n_local_heads, c.head_dim, -1)[:, order].reshape(kv_rows, -1),
        "self_attn.v_proj.weight": value,
    }


def _split_shapes(name: str, shape: tuple[int, ...], c: CodebookDecoderConfig) -> dict[str, tuple[int, ...]]:
    """The shapes `split_wqkv` gives a fused projection of `shape`; raises if its rows are not the config's."""
    q_rows, kv_rows = _wqkv_rows(c)
    if shape[0] != 2 * q_rows + 2 * kv_rows:
        raise ValueError(f"{name} has {shape[0]} rows, the config's heads need {2 * q_rows + 2 * kv_rows}")
    rows = {"self_attn.q_proj.weight": 2 * q_rows, "self_attn.k_proj.weight": kv_rows, "self_attn.v_proj.weight": kv_rows}
    return {part: (count, *shape[1:]) for part, count in rows.items()}


def tower_weights(weights: Mapping[str, torch.Tensor], c: CodebookDecoderConfig) -> DerivedWeights:
    """The tower's tensors under module names, each read (split, permuted) when asked for: a fused projection is read
    once for each of its three parts (the tower is small beside the backbone). Raises, reading nothing, on an
    audio_decoder* tensor it does not know."""
    order = half_split_order(c.head_dim, c.rotary_dim)
    recipes: dict[str, Recipe] = {}
    for name in weights:
        shape = shape_of(weights, name)
        read = (shape, lambda name=name: weights[name])
        if name == "audio_decoder.codebook_embeddings.weight":
            recipes["tower.codebook_embeddings.weight"] = read
            continue
        head = re.fullmatch(r"audio_decoder_mtp\.heads\.(\d+)\.weight", name)
        if head:
            recipes[f"tower.codebook_heads.{head[1]}.weight"] = read
            continue
        match = _LAYER.fullmatch(name)
        if match is None:
            raise ValueError(f"{name} is not a tensor of Drama 3's codebook decoder")
        prefix = f"tower.{'shared_layers' if match[1] else 'residual_layers'}.{match[2]}."
        part = match[3]
        if part == "transformer_layer.attention.wqkv.weight":
            for target, split_shape in _split_shapes(name, shape, c).items():
                recipes[prefix + target] = (split_shape, lambda name=name, target=target: split_wqkv(weights[name], c)[target])
        elif part in ("transformer_layer.attention.q_norm.weight", "transformer_layer.attention.k_norm.weight"):
            recipes[prefix + f"self_attn.{part.split('.')[2]}.weight"] = (shape, lambda name=name: weights[name][order])
        elif part in _RENAMES:
            target = prefix + _RENAMES[part]
            if target in recipes:
                raise ValueError(f"{name}: the layer has both semantic_embedding and codebook_embedding")
            recipes[target] = read
        else:
            raise ValueError(f"{name} is not a tensor of Drama 3's codebook decoder")
    return DerivedWeights(recipes)


def module_weights(weights: Mapping[str, torch.Tensor], config: Drama3Config, dtype: torch.dtype = torch.float32) -> DerivedWeights:
    """The checkpoint's tensors renamed (and fused, split) for `Drama3`, each made when `load_strict` asks for it
    (a fused expert tensor from its layer's experts only); FP8 experts stay FP8, any other FP8 weight is dequantised
    into `dtype`. Names, shapes and dtypes are checked first, from the files' headers where `weights` reads them."""
    if config.fp8_experts:
        log.info("keeping the routed experts FP8 (dequantised per expert at use): %.2f GiB less than in %s",
                 dequantised_growth(weights, dtype) / 2**30, dtype)
        weights = fuse_fp8_experts(weights, FP8_BLOCK, dtype)
    else:
        fp8 = next((n for n in weights if dtype_of(weights, n) == torch.float8_e4m3fn), None)
        if fp8 is not None:
            raise ValueError(f"{fp8} is float8 but config.json has no bsgemm-moe quantization_config")
    rest = {n for n in weights if not n.startswith(("model.language_model.", "audio_decoder"))} - {"lm_head.weight"}
    if rest:
        raise ValueError(f"tensors outside Drama 3's namespaces: {sorted(rest)[:8]}")
    backbone = fuse_expert_weights(renamed(weights, lambda n: n if n.startswith("model.language_model.") else None))
    decoder = tower_weights(renamed(weights, lambda n: n if n.startswith("audio_decoder") else None), config.decoder)
    head = renamed(weights, lambda n: n if n == "lm_head.weight" else None)
    return merged(backbone, decoder, head)


def load_drama3(directory: Path, config: Drama3Config, device: torch.device | str = "cpu",
                dtype: torch.dtype = torch.float32) -> Drama3:
    """The model in `dtype` (FP8 experts kept FP8), its published tensors read one at a time as they are copied."""
    model = build_empty(lambda: Drama3(config), dtype)  # parameters in their dtype from the start; FP8 buffers stay FP8
    load_strict(model, module_weights(SafetensorsReader(Path(directory)), config, dtype), Path(directory))
    return model.to(device=device, dtype=dtype).eval()
