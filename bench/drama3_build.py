"""A random Fish Audio Drama 3 checkpoint at assumed published sizes, in the published layout, optionally shallower.

fishaudio/drama-3's config.json and tensor index are not known here; bench/configs/drama3_assumed_sizes.json says
what stands in for them (Qwen3.5-35B-A3B's backbone, an assumed codebook tower). The backbone's routed experts are
written as the published `bsgemm-moe` layout has them: float8_e4m3fn codes one expert at a time with a float32
`weight_scale_inv` per [128, 128] block; everything else is bfloat16, as published. The whole model is ~33 GiB of FP8
experts, over what this CPU machine holds, so `layers` keeps the first N of the 40 backbone layers (the layer-type
pattern unchanged): every part is at its full size except how many of the identical layers there are, which is what
a memory measurement needs to extrapolate.

The files are written one shard per backbone layer (plus one for the embeddings and head, one for the tower), so the
builder holds one layer at a time; bench/gpu.py puts S2 Pro's DAC at its published geometry beside them (codec.pth),
as the reference server takes S2 Pro's codec. The tokenizer is the tiny checkpoint's (text tokenisation is not measured).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SIZES = ROOT / "bench" / "configs" / "drama3_assumed_sizes.json"
FP8 = torch.float8_e4m3fn
BLOCK = 128
PUBLISHED_LAYERS = 40


def config_json(tiny_config: dict, layers: int | None = None, sizes: dict | None = None) -> dict:
    """The tiny checkpoint's config.json with `sizes` (default: the assumed published ones) laid over, and `layers`
    backbone layers."""
    sizes = sizes or json.loads(SIZES.read_text())
    text = dict(sizes["text_config"])
    if layers is not None:
        interval = text["full_attention_interval"]
        if not (1 <= layers <= text["num_hidden_layers"] and layers % interval == 0):
            raise ValueError(f"layers must be a multiple of {interval} (the linear/full-attention pattern, whole) up to "
                             f"{text['num_hidden_layers']}; got {layers}")
        text["num_hidden_layers"] = layers
    text["mlp_layer_types"] = ["moe"] * text["num_hidden_layers"]
    top = {k: v for k, v in sizes.items() if not k.startswith("_")}
    return {**tiny_config, **top, "text_config": text}


def fp8_blocks(rows: int, cols: int, count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` random matrices as FP8 codes [count, rows, cols] and per-block scales: the dequantised values have the
    spread of a 1/sqrt(cols) initialisation."""
    codes = torch.randn(count, rows, cols, generator=generator).to(FP8)
    scale = torch.full((count, math.ceil(rows / BLOCK), math.ceil(cols / BLOCK)), 1 / math.sqrt(cols))
    return codes, scale


def dense(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """A bfloat16 weight of `shape`: matrices at 1/sqrt(fan-in); vectors (norm gammas, zero-centred: 0 is a gain of 1;
    recurrent decay and step biases) small."""
    if len(shape) == 1:
        return (torch.randn(shape, generator=generator) * 0.1).to(torch.bfloat16)
    fan_in = math.prod(shape[1:])
    return (torch.randn(shape, generator=generator) / math.sqrt(fan_in)).to(torch.bfloat16)


def backbone_shapes(config_dir: Path) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every backbone and head tensor of the served module (names and shapes), built on the meta device."""
    from vocalis.stages.models.drama3.config import Drama3Config
    from vocalis.stages.models.drama3.modules import Drama3

    with torch.device("meta"):
        model = Drama3(Drama3Config.from_dir(config_dir))
    return {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items() if not k.startswith("tower.")}


def _layer_of(name: str) -> int | None:
    parts = name.split(".")
    return int(parts[3]) if parts[:3] == ["model", "language_model", "layers"] else None


def published_layer(shapes: dict[str, tuple[tuple[int, ...], torch.dtype]], generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One layer's (or the embeddings' and head's) tensors under the published names: the fused experts the module
    holds written back as one FP8 matrix (and scale) per expert and projection."""
    out: dict[str, torch.Tensor] = {}
    for name, (shape, dtype) in shapes.items():
        if name.endswith("_scale_inv"):
            continue
        if dtype == FP8:
            prefix = name.rsplit(".", 1)[0]
            experts, rows, cols = shape
            if name.endswith("gate_up_proj"):
                parts = {"gate_proj": rows // 2, "up_proj": rows // 2}
            else:
                parts = {"down_proj": rows}
            for part, part_rows in parts.items():
                codes, scales = fp8_blocks(part_rows, cols, experts, generator)
                for e in range(experts):
                    out[f"{prefix}.{e}.{part}.weight"] = codes[e]
                    out[f"{prefix}.{e}.{part}.weight_scale_inv"] = scales[e]
        else:
            out[name] = dense(shape, generator)
    return out


def build(out: Path, tiny_config: dict, layers: int | None, save: Callable[[dict, Path], None], sizes: dict | None = None,
          seed: int = 0) -> None:
    """Write config.json and the model's shards into `out`, which holds the tiny checkpoint's other files (its codec
    too: bench/gpu.py writes S2 Pro's published one over it)."""
    with torch.device("cpu"):  # the generator is a CPU one, whatever device the caller builds on
        _build(out, config_json(tiny_config, layers, sizes), save, seed)


def _build(out: Path, config: dict, save: Callable[[dict, Path], None], seed: int) -> None:
    from tests.tiny_drama3.build import decoder_tensors

    (out / "config.json").write_text(json.dumps(config, indent=2))
    for stale in out.glob("*.safetensors"):
        stale.unlink()
    generator = torch.Generator().manual_seed(seed)
    shapes = backbone_shapes(out)
    by_layer: dict[int | None, dict] = {}
    for name, entry in shapes.items():
        by_layer.setdefault(_layer_of(name), {})[name] = entry
    for layer, layer_shapes in sorted(by_layer.items(), key=lambda item: -1 if item[0] is None else item[0]):
        tensors = published_layer(layer_shapes, generator)
        if layer is None:
            tensors["lm_head.weight"][config["eos_token_id"]] = 0  # never the likeliest: requests run to their budget
        save(tensors, out / f"model-{'base' if layer is None else f'layer-{layer:02d}'}.safetensors")
        del tensors
    tower = {k: v.to(torch.bfloat16) for k, v in decoder_tensors(generator, config["audio_decoder_config"]).items()}
    save(tower, out / "model-tower.safetensors")
    del tower
