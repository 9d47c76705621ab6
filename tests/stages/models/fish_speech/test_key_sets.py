"""The tensors our loaders build for the published S2 Pro geometry, against the real layout.

- The codec: every name and shape of fish-speech 0.1.0's DAC built with the published geometry
  (tests/goldens/fish_speech/real_codec_keys.json, made by make_goldens.py), weight norm folded, the RoPE/mask
  buffers left out (recomputed here) — nothing missing, nothing extra.
- The dual AR: the names the published `model.safetensors` holds (as vLLM-Omni's loader and the issue list them:
  `text_model.model.{embeddings,layers.N.attention.{wqkv,wo,q_norm,k_norm},feed_forward.{w1,w2,w3},attention_norm,
  ffn_norm,norm}`, `audio_decoder.{codebook_embeddings,embeddings,layers.N.*,norm,output}`, no q/k-norm in the fast
  AR, no `project_in` at equal widths) with the shapes of the published config. No real index file could be
  read here; the shapes follow from the config's published values.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from vocalis.stages.layers.weights import WEIGHT_NORM_SPELLINGS
from vocalis.stages.models.fish_common.fish_dac import DERIVED_KEYS, FishDAC
from vocalis.stages.models.fish_common.fish_dac_config import FishDACConfig
from vocalis.stages.models.fish_speech.config import FishSpeechConfig
from vocalis.stages.models.fish_speech.dual_ar import FishDualAR

GOLDENS = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech"
S2_PRO_CONFIG = {"model_type": "fish_qwen3_omni", "text_config": {}, "audio_decoder_config": {},
                 "semantic_start_token_id": 151678, "semantic_end_token_id": 155773, "audio_pad_token_id": 151677}


def built(module_factory) -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        module = module_factory()
    return {name: tuple(t.shape) for name, t in module.state_dict().items()}


def test_codec_keys_equal_the_reference_at_the_published_geometry():
    reference = json.loads((GOLDENS / "real_codec_keys.json").read_text())
    derived = [re.compile(p) for p in DERIVED_KEYS]
    folded = {}
    for name, shape in reference.items():
        if any(p.fullmatch(name) for p in derived):
            continue
        for g, v in WEIGHT_NORM_SPELLINGS:
            if name.endswith("." + g):
                name, shape = None, None
                break
            if name.endswith("." + v):
                name = name[: -len(v)] + "weight"
                break
        if name is not None:
            folded[name] = tuple(shape)
    ours = built(lambda: FishDAC(FishDACConfig()))
    assert sorted(set(folded) - set(ours)) == [] and sorted(set(ours) - set(folded)) == []
    assert {k: v for k, v in ours.items() if folded[k] != v} == {}
    assert len(ours) > 300 and ours["quantizer.semantic_quantizer.quantizers.0.codebook.weight"] == (4096, 8)


def test_dual_ar_keys_at_the_published_geometry():
    config = FishSpeechConfig.from_dict(S2_PRO_CONFIG)
    ours = built(lambda: FishDualAR(config))
    normalized = {re.sub(r"\.layers\.\d+\.", ".layers.N.", k) for k in ours}
    layer = ["attention.wqkv.weight", "attention.wo.weight", "feed_forward.w1.weight", "feed_forward.w2.weight",
             "feed_forward.w3.weight", "attention_norm.weight", "ffn_norm.weight"]
    expected = {"text_model.model.embeddings.weight", "text_model.model.norm.weight",
                *(f"text_model.model.layers.N.{p}" for p in [*layer, "attention.q_norm.weight", "attention.k_norm.weight"]),
                "audio_decoder.codebook_embeddings.weight", "audio_decoder.embeddings.weight", "audio_decoder.norm.weight",
                "audio_decoder.output.weight", *(f"audio_decoder.layers.N.{p}" for p in layer)}
    assert normalized == expected
    assert sum(k.startswith("text_model.model.layers.") and k.endswith("wqkv.weight") for k in ours) == 36
    assert sum(k.startswith("audio_decoder.layers.") and k.endswith("wqkv.weight") for k in ours) == 4
    assert ours["text_model.model.embeddings.weight"] == (155776, 2560)
    assert ours["audio_decoder.codebook_embeddings.weight"] == (4096 * 10, 2560)
    assert ours["text_model.model.layers.0.attention.wqkv.weight"] == ((32 + 2 * 8) * 128, 2560)
    assert ours["text_model.model.layers.0.attention.wo.weight"] == (2560, 32 * 128)
    assert ours["text_model.model.layers.0.attention.q_norm.weight"] == (128,)
    assert ours["text_model.model.layers.0.feed_forward.w1.weight"] == (9728, 2560)
    assert ours["audio_decoder.output.weight"] == ours["audio_decoder.embeddings.weight"] == (4096, 2560)
