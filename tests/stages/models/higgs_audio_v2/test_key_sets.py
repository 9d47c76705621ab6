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
from vocalis.stages.layers.weights import load_strict
from vocalis.stages.models.higgs_audio_v2.config import HiggsAudioV2Config
from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker
from vocalis.stages.models.higgs_audio_v2.weights import BOSON_UNUSED, NATIVE_UNUSED, boson_to_native, join_partially_frozen

REAL_KEYS = json.loads((checkpoint.HERE / "real_keys.json").read_text())
PUBLISHED = {"model_type": "higgs_audio_v2", "codebook_size": 1026, "num_key_value_heads": 8, "head_dim": 128}
"""The published config's values where a missing key would read otherwise (Llama's defaults: no GQA, hidden / heads)."""


def built() -> dict[str, list[int]]:
    with torch.device("meta"):
        talker = HiggsAudioV2Talker(HiggsAudioV2Config._native(PUBLISHED))
    return {k: list(v.shape) for k, v in talker.state_dict().items()}


def test_native_key_set_is_the_published_one():
    unused = [k for k in REAL_KEYS if any(re.fullmatch(p, k) for p in NATIVE_UNUSED)]
    assert unused == ["text_lm_head.weight"]
    assert built() == {k: v for k, v in REAL_KEYS.items() if k not in unused}
    assert len(REAL_KEYS) == 5 + 28 * 14  # embeddings, 2 heads, final norm; 4 attention, 6 MLP, 4 norms a layer


def test_boson_names_map_onto_the_same_set_and_only_the_declared_ones_are_left():
    boson = {checkpoint.boson_name(k): v for k, v in REAL_KEYS.items()}
    boson |= {"audio_codebook_weights": [8], "layers.0.self_attn.rotary_emb.inv_freq": [64]}
    # Boson's training saved the token embedding as a frozen and a trainable part
    vocab, width = boson.pop("embed_tokens.weight")
    parts = {"embed_tokens.embedding_frozen.weight": [128000, width], "embed_tokens.embedding_trainable.weight": [vocab - 128000, width]}
    weights = {k: torch.empty(v, device="meta") for k, v in (boson | parts).items()}
    joined = join_partially_frozen(weights)
    unused = sorted(k for k in joined if any(re.fullmatch(p, k) for p in BOSON_UNUSED))
    assert unused == ["audio_codebook_weights", "audio_decoder_proj.text_lm_head.weight", "layers.0.self_attn.rotary_emb.inv_freq"]
    mapped = {boson_to_native(k): list(v.shape) for k, v in joined.items() if k not in unused}
    assert mapped == built()


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


def test_the_codec_is_found_inside_or_where_the_processor_points(native_dir, tmp_path, monkeypatch):
    import json
    import shutil

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # a repo id that is not cached fails at once
    from vocalis.stages.models.higgs_audio_v2.codec_location import codec_dir

    assert codec_dir(native_dir) == native_dir / "audio_tokenizer"
    pointed = tmp_path / "pointed"
    shutil.copytree(native_dir, pointed, ignore=shutil.ignore_patterns("audio_tokenizer"))
    with pytest.raises(ValueError, match="no codec"):
        codec_dir(pointed)
    entry = {"audio_tokenizer_class": "HiggsAudioV2TokenizerModel", "audio_tokenizer_name_or_path": str(native_dir / "audio_tokenizer")}
    (pointed / "processor_config.json").write_text(json.dumps({"audio_tokenizer": entry}))
    assert codec_dir(pointed) == native_dir / "audio_tokenizer"
    (pointed / "audio_tokenizer_config.json").write_text(json.dumps(entry | {"audio_tokenizer_name_or_path": "no/such-dir-or-repo"}))
    with pytest.raises(ValueError, match="no/such-dir-or-repo"):
        codec_dir(pointed)
