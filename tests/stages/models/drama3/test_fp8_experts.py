"""Drama 3's routed experts stay FP8 in memory (stages/models/drama3/fp8_experts.py) and compute exactly what the
checkpoint dequantised on load (`codes.float() * scale`, then the serving dtype) computed: each expert's dequantised
weights and the model's outputs (backbone logits, every codebook head's logits) are equal bit for bit, in float32
and bfloat16, since the same float32 products are cast to the same dtype and the same matrix products run on them. And the memory claim, structurally: after loading,
the experts hold 1 byte per weight plus a float32 scale per [128, 128] block, whatever the serving dtype."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.tiny_drama3.build import NUM_CODEBOOKS, SEMANTIC_START
from vocalis.stages.layers.moe import Experts
from vocalis.stages.layers.weights import load_strict, read_safetensors
from vocalis.stages.models.drama3.block_fp8 import (
    SCALE_SUFFIX,
    DequantScratch,
    check_codes,
    dequantize_block_fp8,
    fp8_over_256,
    quantize_block_fp8,
)
from vocalis.stages.models.drama3.config import FP8_BLOCK, Drama3Config
from vocalis.stages.models.drama3.fp8_experts import BlockFp8Experts, fuse_fp8_experts
from vocalis.stages.models.drama3.modules import Drama3
from vocalis.stages.models.drama3.tower import RowGroup
from vocalis.stages.models.drama3.weights import load_drama3, module_weights

ROWS, TEXT_ROWS = 48, 16


def code_times_scale(codes: torch.Tensor, scale: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    """The former loader's dequantisation, spelled out: float32 codes times each element's block scale."""
    rows, cols = codes.shape
    return codes.float() * scale.repeat_interleave(block[0], 0)[:rows].repeat_interleave(block[1], 1)[:, :cols]


def dequantised_on_load(directory, config: Drama3Config, dtype: torch.dtype) -> Drama3:
    """The former loader: every FP8 expert dequantised into `dtype` before the model sees it."""
    published = read_safetensors(directory)
    weights = {n: code_times_scale(t, published[n + SCALE_SUFFIX], FP8_BLOCK).to(dtype) if t.dtype == torch.float8_e4m3fn else t
               for n, t in published.items() if not n.endswith(SCALE_SUFFIX)}
    dense = dataclasses.replace(config, fp8_experts=False)
    model = Drama3(dense)
    load_strict(model, module_weights(weights, dense), directory)
    return model.to(dtype=dtype).eval()


def experts_of(model: Drama3) -> list:
    return [layer.mlp.experts for layer in model.backbone.layers]


def outputs(model: Drama3, rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Full-vocabulary logits of the backbone over `rows`, then every codebook head's logits, teacher-forced."""
    heads: list[torch.Tensor] = []

    def choose(j: int, logits: torch.Tensor) -> torch.Tensor:
        heads.append(logits)
        return rows[1:, 2 + j]

    with torch.no_grad():
        hidden = model.backbone.dense(model.embed_rows(rows)[None])[0]
        model.tower.run(hidden[:-1], torch.arange(len(rows) - 1), rows[:-1], rows[1:, 0],
                        [RowGroup(model.tower.new_cache(dtype, "cpu"), 0, len(rows) - 1)], choose=choose)
    return torch.cat([model.logits(hidden).flatten(), *(h.flatten() for h in heads)])


def frame_rows(config: Drama3Config) -> torch.Tensor:
    g = torch.Generator().manual_seed(4)
    codes = torch.randint(0, config.decoder.vocab_size, (ROWS, NUM_CODEBOOKS), generator=g)
    rows = torch.cat([codes[:, :1] + SEMANTIC_START, codes], dim=1)
    rows[:TEXT_ROWS] = 0
    rows[:TEXT_ROWS, 0] = torch.randint(0, SEMANTIC_START, (TEXT_ROWS,), generator=g)
    return rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kept_fp8_experts_compute_what_dequantising_on_load_did(drama3_dir, dtype):
    config = Drama3Config.from_dir(drama3_dir)
    kept, reference = load_drama3(drama3_dir, config, dtype=dtype), dequantised_on_load(drama3_dir, config, dtype)
    for fp8, dense in zip(experts_of(kept), experts_of(reference), strict=True):
        assert isinstance(fp8, BlockFp8Experts) and isinstance(dense, Experts)
        for e in range(fp8.num_experts):
            gate_up, down = fp8.expert_weights(e, dtype)
            assert gate_up.dtype == down.dtype == dtype
            assert torch.equal(gate_up, dense.gate_up_proj[e]) and torch.equal(down, dense.down_proj[e])
    rows = frame_rows(config)
    got, want = outputs(kept, rows, dtype), outputs(reference, rows, dtype)
    assert torch.isfinite(want).all() and torch.equal(got, want)


def tensor_bytes(module: torch.nn.Module) -> dict[torch.dtype, int]:
    """Bytes of a module's parameters and buffers, by dtype."""
    out: dict[torch.dtype, int] = {}
    for t in [*module.parameters(), *module.buffers()]:
        out[t.dtype] = out.get(t.dtype, 0) + t.numel() * t.element_size()
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loaded_experts_hold_the_published_fp8_bytes(drama3_dir, dtype):
    published = read_safetensors(drama3_dir)
    fp8 = [n for n, t in published.items() if t.dtype == torch.float8_e4m3fn]
    codes = sum(published[n].numel() for n in fp8)
    scales = sum(published[n + SCALE_SUFFIX].numel() * 4 for n in fp8)
    assert fp8 and all(".experts." in n for n in fp8)

    model = load_drama3(drama3_dir, Drama3Config.from_dir(drama3_dir), dtype=dtype)
    experts = experts_of(model)
    held = [t for e in experts for t in [*e.parameters(), *e.buffers()]]
    assert {t.dtype for t in held} == {torch.float8_e4m3fn, torch.float32}
    assert sum(t.numel() * t.element_size() for t in held) == codes + scales
    by_dtype = tensor_bytes(model)
    assert by_dtype[torch.float8_e4m3fn] == codes  # no other FP8 tensor, and none widened
    others = sum(t.numel() for n, t in published.items() if n not in fp8 and not n.endswith(SCALE_SUFFIX))
    assert by_dtype[dtype] - (scales if dtype == torch.float32 else 0) == others * dtype.itemsize

    model.to(torch.float16)  # a later cast or move keeps the codes and scales as they are
    model.to("meta")
    assert [(t.dtype, t.device.type) for t in experts[0].buffers()] == [(torch.float8_e4m3fn, "meta"), (torch.float32, "meta")] * 2


@pytest.mark.parametrize("intermediate", [128, 200])  # whole blocks (gate and up dequantised as one) and not
def test_fused_experts_dequantise_like_each_published_weight(intermediate):
    hidden, count = 256, 2
    g = torch.Generator().manual_seed(1)
    published: dict[str, torch.Tensor] = {}
    for e in range(count):
        for part, shape in [("gate_proj", (intermediate, hidden)), ("up_proj", (intermediate, hidden)), ("down_proj", (hidden, intermediate))]:
            codes, scale = quantize_block_fp8(torch.randn(*shape, generator=g) * (1 + e), FP8_BLOCK)
            published[f"mlp.experts.{e}.{part}.weight"], published[f"mlp.experts.{e}.{part}.weight{SCALE_SUFFIX}"] = codes, scale
    experts = BlockFp8Experts(count, hidden, intermediate, FP8_BLOCK)
    fused = fuse_fp8_experts(published | {"mlp.gate.weight": torch.ones(count, hidden)}, FP8_BLOCK)
    assert set(fused) == {"mlp.gate.weight"} | {f"mlp.experts.{n}" for n in experts.state_dict()}
    experts.load_state_dict({n[len("mlp.experts."):]: t for n, t in fused.items() if n.startswith("mlp.experts.")})

    def each(e: int, part: str) -> torch.Tensor:
        name = f"mlp.experts.{e}.{part}.weight"
        return dequantize_block_fp8(published[name], published[name + SCALE_SUFFIX], FP8_BLOCK, torch.bfloat16)

    for e in range(count):
        gate_up, down = experts.expert_weights(e, torch.bfloat16)
        assert torch.equal(gate_up, torch.cat([each(e, "gate_proj"), each(e, "up_proj")]))
        assert torch.equal(down, each(e, "down_proj"))


def test_every_code_dequantises_to_its_float32_product_with_any_scale():
    """The float16 route of `fp8_over_256` against torch's own float8 conversion: all 254 finite codes (subnormals,
    signed zeros, +-448), scales from float32's subnormals to 1e30, whole blocks (one row each) and partial ones."""
    codes = torch.arange(256, dtype=torch.uint8)
    codes = codes[(codes & 0x7F) != 0x7F].view(torch.float8_e4m3fn)
    scales = torch.tensor([1e-42, 2.0**-126, 1e-20, 3.7e-4, 0.0123, 1.0, 7.3, 448.0, 1e30])
    weight = codes.repeat(len(scales), 1)
    for scale, block in [(scales[:, None], (1, len(codes))), (scales[None, [3, 8]], FP8_BLOCK)]:
        assert torch.equal(dequantize_block_fp8(weight, scale, block), code_times_scale(weight, scale, block))
    assert torch.equal(fp8_over_256(codes) * 256, codes.float())
    with pytest.raises(ValueError, match="w holds NaN FP8 codes"):
        check_codes("w", torch.tensor([0x7F], dtype=torch.uint8).view(torch.float8_e4m3fn))


def test_whole_blocks_dequantise_like_partial_ones():
    codes, scales = quantize_block_fp8(torch.randn(256, 384, generator=torch.Generator().manual_seed(2)), FP8_BLOCK)
    assert torch.equal(dequantize_block_fp8(codes, scales, FP8_BLOCK), code_times_scale(codes, scales, FP8_BLOCK))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scratch_buffers_give_the_same_bits_and_are_reused_per_thread_and_mode(dtype):
    """fp8_experts.py dequantises every expert a step reaches into buffers kept per thread: the same bits as a fresh
    dequantisation, the same memory on the next call, another thread's or inference mode's buffers apart."""
    import threading

    scratch = DequantScratch()
    g = torch.Generator().manual_seed(3)
    first, second = (quantize_block_fp8(torch.randn(256, 384, generator=g), FP8_BLOCK) for _ in range(2))
    out = dequantize_block_fp8(*first, FP8_BLOCK, dtype, scratch.buffers("w", first[0], dtype))
    assert out.dtype == dtype and torch.equal(out, dequantize_block_fp8(*first, FP8_BLOCK, dtype))
    again = dequantize_block_fp8(*second, FP8_BLOCK, dtype, scratch.buffers("w", second[0], dtype))
    assert again.data_ptr() == out.data_ptr() and torch.equal(again, dequantize_block_fp8(*second, FP8_BLOCK, dtype))
    other: list[torch.Tensor] = []
    thread = threading.Thread(target=lambda: other.append(scratch.buffers("w", first[0], dtype).out))
    thread.start()
    thread.join()
    with torch.inference_mode():
        inference = scratch.buffers("w", first[0], dtype).out
    assert len({out.data_ptr(), other[0].data_ptr(), inference.data_ptr()}) == 3
    assert scratch.buffers("v", first[0], dtype).out.data_ptr() != out.data_ptr()


def test_a_dense_expert_in_a_quantised_checkpoint_is_refused():
    codes, scale = quantize_block_fp8(torch.randn(8, 8), FP8_BLOCK)
    weights = {"x.experts.0.gate_proj.weight": codes, f"x.experts.0.gate_proj.weight{SCALE_SUFFIX}": scale,
               "x.experts.0.up_proj.weight": torch.randn(8, 8)}
    with pytest.raises(ValueError, match="x.experts.0.up_proj.weight is not FP8"):
        fuse_fp8_experts(weights, FP8_BLOCK)


def test_nan_expert_codes_are_refused_when_their_layer_is_read():
    """Codes are checked as they are read (fusing is lazy): asking for the fused layer names the NaN expert."""
    weights: dict[str, torch.Tensor] = {}
    for part in ("gate_proj", "up_proj", "down_proj"):
        codes, scale = quantize_block_fp8(torch.randn(8, 8), FP8_BLOCK)
        weights[f"x.experts.0.{part}.weight"], weights[f"x.experts.0.{part}.weight{SCALE_SUFFIX}"] = codes, scale
    weights["x.experts.0.up_proj.weight"].view(torch.uint8)[3, 4] = 0x7F
    fused = fuse_fp8_experts(weights, FP8_BLOCK)
    assert fused.shape("x.experts.gate_up_proj") == (1, 16, 8)
    assert fused["x.experts.down_proj"].dtype == torch.float8_e4m3fn  # the other layer tensors read as usual
    with pytest.raises(ValueError, match=r"x.experts.0.up_proj.weight holds NaN FP8 codes"):
        fused["x.experts.gate_up_proj"]
