"""Drama 3's backbone, loaded from the tiny checkpoint in the published layout (FP8 experts kept FP8, dequantised at use),
against transformers' `qwen3_5_moe` logits (tests/goldens/drama3/make_goldens.py: the qwen3_5_moe golden model with
Drama 3's vocabulary, FP8 experts and untied lm_head): a dense forward and a cached prefill + decodes through the
runtime's paged KV cache and recurrent states. Logits agree to <= 1e-4 at all but a few positions; the worst is
7e-4 on the machine that made the goldens and 1.2e-3 on an AVX-512 Xeon (max |logit| 5.5): the two torch forms of the
gated delta rule drift apart with the CPU's float32 rounding (transformers' own dense and cached runs differ by 7e-5),
and the tiny routers' top-8 choices are near ties at most positions. So the bound is float32 rounding along the
forward plus the decays' (`backbone_bound`: 4.9e-3 dense, 6.3e-3 cached, where every step's pass is counted; a wrong
layer or routing is off by O(1)). Also the config checks and the FP8 format itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import Trace, rounding_bound, traced
from vocalis.stages.models.drama3.block_fp8 import (
    dequantised_growth,
    dequantize_block_fp8,
    dequantize_checkpoint,
    quantize_block_fp8,
)
from vocalis.stages.models.drama3.config import Drama3Config, Drama3ConfigError
from vocalis.stages.models.drama3.weights import load_drama3
from vocalis.stages.runtime.kv_cache import PagedKVCache
from vocalis.stages.runtime.linear_attention import RecurrentStates

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "drama3" / "goldens.safetensors"


def backbone_bound(path: Trace, logits: torch.Tensor) -> float:
    """float32 rounding along the forward, plus its ill-conditioned step: the gated delta rule's decays are exponentials
    of differences of cumsums of log-decays (up to `path.cumulated`, over a 64-position chunk), each off relatively by
    those cumsums' rounding, and the two torch forms round them differently; the logits carry that relative error."""
    decays = rounding_bound(torch.float32, path.cumulated, 64)
    return rounding_bound(torch.float32, path.peak, path.steps) + decays * float(logits.abs().max())


@pytest.fixture(scope="module")
def loaded(drama3_dir):
    config = Drama3Config.from_dir(drama3_dir)
    return load_drama3(drama3_dir, config), load_file(str(GOLDENS))


def test_dense_logits_match_transformers(loaded):
    model, golden = loaded
    with torch.no_grad(), traced() as path:
        hidden = model.backbone.dense(model.embed_rows(torch.nn.functional.pad(golden["golden.ids"][:, None], (0, 10)))[None])[0]
        logits = model.logits(hidden)
    torch.testing.assert_close(logits, golden["golden.logits"], atol=backbone_bound(path, logits), rtol=0)


def test_cached_prefill_then_decodes_match_transformers(loaded):
    model, golden = loaded
    ids = golden["golden.ids"]
    backbone = model.backbone
    cache = PagedKVCache(backbone.cache_shape(256), num_blocks=16, block_size=8)
    cache.states = RecurrentStates(backbone.state_shape(), num_slots=2)
    cache.states.reset(torch.tensor([0]))
    table, outs, start = list(range(cache.blocks.blocks_for(len(ids)))), [], 0
    with torch.no_grad(), traced() as path:  # every step counted: the recurrent states chain them
        for n in [80] + [1] * 10:
            batch = cache.batch([table], [start], [n], state_slots=[0])
            outs.append(model.logits(backbone.cached(backbone.embed_tokens(ids[start : start + n]), batch, cache)))
            start += n
    torch.testing.assert_close(torch.cat(outs), golden["golden.cached_logits"], atol=backbone_bound(path, torch.cat(outs)), rtol=0)


def test_fp8_blocks_dequantise_with_their_own_scales():
    torch.manual_seed(0)
    weight = torch.randn(200, 300)
    codes, scales = quantize_block_fp8(weight, (128, 128))
    assert codes.dtype == torch.float8_e4m3fn and scales.shape == (2, 3)
    back = dequantize_block_fp8(codes, scales, (128, 128))
    assert (back - weight).abs().max() < 0.07 * weight.abs().max()  # e4m3: 3 mantissa bits
    assert torch.equal(back[128:, 256:], codes[128:, 256:].float() * scales[1, 2])  # the last, partial block
    with pytest.raises(ValueError, match=r"needs scales of shape \[2, 3\]"):
        dequantize_block_fp8(codes, scales[:1], (128, 128))
    ckpt = {"a.weight": codes, "a.weight_scale_inv": scales, "b.weight": weight}
    out = dequantize_checkpoint(ckpt, (128, 128), torch.bfloat16)
    assert set(out) == {"a.weight", "b.weight"} and out["a.weight"].dtype == torch.bfloat16
    assert dequantised_growth(ckpt, torch.bfloat16) == 200 * 300 - 6 * 4
    with pytest.raises(ValueError, match="a.weight is float8 but the checkpoint has no a.weight_scale_inv"):
        dequantize_checkpoint({"a.weight": codes}, (128, 128))


def test_fp8_experts_are_refused_without_their_quantization_config(drama3_dir, tmp_path):
    data = json.loads((drama3_dir / "config.json").read_text())
    del data["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(data))
    (tmp_path / "model.safetensors").symlink_to(drama3_dir / "model.safetensors")
    with pytest.raises(ValueError, match="is float8 but config.json has no bsgemm-moe quantization_config"):
        load_drama3(tmp_path, Drama3Config.from_dict(data))


@pytest.mark.parametrize(("change", "message"), [
    ({"speech_template_version": "reference-bracket-v2"}, "speech_template_version 'reference-bracket-v2' is not supported"),
    ({"fish_schema_version": 2}, "fish_schema_version 2 is not supported"),
    ({"audio_encoder_config": {}}, "audio_encoder_config is not supported"),
    ({"semantic_end_token_id": 390}, "does not match audio_decoder_config.vocab_size 64"),
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, "quant_method 'fp8' is not supported"),
])
def test_config_refusals_name_the_field(drama3_dir, change, message):
    data = json.loads((drama3_dir / "config.json").read_text()) | change
    with pytest.raises(Drama3ConfigError, match=message):
        Drama3Config.from_dict(data)


def test_decoder_and_text_config_refusals(drama3_dir):
    data = json.loads((drama3_dir / "config.json").read_text())
    for section, change, message in [
        ("audio_decoder_config", {"decoder_type": "fast_ar"}, "decoder_type 'fast_ar' is not supported"),
        ("audio_decoder_config", {"n_layer": 3}, "n_layer 3 differs from shared_enrichment_layers 2"),
        ("audio_decoder_config", {"vq_feature_placement": "backbone_partial"}, "backbone_partial needs 1 <= vq_backbone_codebooks"),
        ("text_config", {"rotary_interleaved": True}, "text_config.rotary_interleaved must be False"),
        ("text_config", {"model_type": "qwen3_5_text"}, "text_config.model_type is 'qwen3_5_text'"),
    ]:
        with pytest.raises(Drama3ConfigError, match=message):
            Drama3Config.from_dict({**data, section: {**data[section], **change}})
    qwen = {**data, "text_config": {k: v for k, v in data["text_config"].items() if k not in ("mlp_layer_types",)}
            | {"model_type": "qwen3_5_moe_text"}}
    assert Drama3Config.from_dict(qwen).text.num_experts == 8  # the plain qwen3_5_moe_text spelling loads too
