"""The tensors the loader builds for the published 3B model, against the published key set.

The transformers-native key set (names and shapes) is the reference class's at its published configuration
(tests/goldens/higgs_audio_v2/real_keys.json, made by make_goldens.py); Boson's original names are those mapped to
Boson's vocabulary, with the text head Boson's file also holds. Nothing missing, nothing unexpected: the unused
tensors are exactly the declared ones.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from tests.goldens.higgs_audio_v2 import checkpoint
from vocalis.stages.models.higgs_audio_v2.config import HiggsAudioV2Config
from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker
from vocalis.stages.models.higgs_audio_v2.weights import BOSON_UNUSED, NATIVE_UNUSED, boson_to_native
from vocalis.stages.weights import load_strict

REAL_KEYS = json.loads((checkpoint.HERE / "real_keys.json").read_text())
PUBLISHED = {"model_type": "higgs_audio_v2", "codebook_size": 1026, "num_key_value_heads": 8, "head_dim": 128}
"""The published config's values where a missing key would read otherwise (Llama's defaults: no GQA, hidden / heads)."""


def built() -> dict[str, list[int]]:
    with torch.device("meta"):
        talker = HiggsAudioV2Talker(HiggsAudioV2Config._native(PUBLISHED))
    return {k: list(v.shape) for k, v in talker.state_dict().items()}


def test_native_key_set_is_the_published_one():
    assert built() == REAL_KEYS
    assert len(REAL_KEYS) == 4 + 28 * 14  # text and audio embeddings, head, final norm; 4 attention, 6 MLP, 4 norms a layer


def test_boson_names_map_onto_the_same_set_and_only_the_declared_ones_are_left():
    boson = {checkpoint.boson_name(k): v for k, v in REAL_KEYS.items()} | {"audio_decoder_proj.text_lm_head.weight": [128256, 3072]}
    mapped = {boson_to_native(k): v for k, v in boson.items()}
    unused = [k for k in boson if any(re.fullmatch(p, k) for p in BOSON_UNUSED)]
    assert unused == ["audio_decoder_proj.text_lm_head.weight"]
    assert {k: v for k, v in mapped.items() if k != "audio_decoder_proj.text_lm_head.weight"} == built()
    assert NATIVE_UNUSED == (r"text_lm_head\.weight",)


def test_a_missing_or_unknown_tensor_fails_by_name(native_dir):
    from safetensors.torch import load_file

    weights = load_file(str(native_dir / "model.safetensors"))
    talker = HiggsAudioV2Talker(HiggsAudioV2Config.from_dir(native_dir))
    missing = dict(weights)
    del missing["model.layers.1.audio_mlp.up_proj.weight"]
    with pytest.raises(ValueError, match=r"missing \['model.layers.1.audio_mlp.up_proj.weight'\]"):
        load_strict(talker, missing, native_dir)
    with pytest.raises(ValueError, match="unexpected.*model.layers.9.mlp.extra"):
        load_strict(talker, weights | {"model.layers.9.mlp.extra": torch.zeros(1)}, native_dir)
