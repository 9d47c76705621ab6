"""Loading a Voxtral TTS checkpoint: detection from params.json, the published key set, strict loading, presets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.goldens.voxtral.build_tiny import build
from vocalis.stages.api import family as families
from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.voxtral.adapter import VoxtralAdapter
from vocalis.stages.models.voxtral.config import VoxtralConfig
from vocalis.stages.models.voxtral.weights import checkpoint_shapes, load_modules
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams

REAL_PARAMS = json.loads((Path(__file__).parents[3] / "goldens/voxtral/real_params.json").read_text())
PUBLISHED_TENSORS = 386
"""Tensors in mistralai/Voxtral-4B-TTS-2603's consolidated.safetensors (its header, as public ports read it)."""


def test_the_published_key_set():
    shapes = checkpoint_shapes(VoxtralConfig.from_dict(REAL_PARAMS))
    assert len(shapes) == PUBLISHED_TENSORS
    known = {  # shapes public ports check against the published header
        "mm_audio_embeddings.tok_embeddings.weight": (131072, 3072),
        "mm_audio_embeddings.audio_codebook_embeddings.embeddings.weight": (9088, 3072),
        "acoustic_transformer.semantic_codebook_output.weight": (8320, 3072),
        "acoustic_transformer.acoustic_codebook_output.weight": (36, 3072),
        "acoustic_transformer.input_projection.weight": (3072, 36),
        "acoustic_transformer.llm_projection.weight": (3072, 3072),
        "acoustic_transformer.layers.2.feed_forward.w2.weight": (3072, 9216),
        "layers.25.attention.wk.weight": (1024, 3072),
        "norm.weight": (3072,),
        "audio_tokenizer.decoder_blocks.0.conv.parametrizations.weight.original0": (1024, 1, 1),
        "audio_tokenizer.decoder_blocks.0.conv.parametrizations.weight.original1": (1024, 292, 3),
        "audio_tokenizer.decoder_blocks.2.conv.parametrizations.weight.original1": (1024, 1024, 4),
        "audio_tokenizer.decoder_blocks.7.layers.1.attention.q_norm.weight": (1024,),
        "audio_tokenizer.decoder_blocks.5.layers.0.attention_scale": (1024,),
        "audio_tokenizer.output_proj.conv.parametrizations.weight.original1": (240, 1024, 7),
        "audio_tokenizer.quantizer.semantic_codebook.embedding_sum": (8192, 256),
        "audio_tokenizer.quantizer.semantic_codebook.cluster_usage": (8192,),
    }
    assert {name: shapes.get(name) for name in known} == known
    prefixes = ("layers.", "norm.", "mm_audio_embeddings.", "acoustic_transformer.", "audio_tokenizer.decoder_blocks.",
                "audio_tokenizer.output_proj.", "audio_tokenizer.quantizer.")
    assert all(name.startswith(prefixes) for name in shapes)
    assert sum(name.startswith("audio_tokenizer.") for name in shapes) == 116


def test_the_published_config_and_presets():
    config = VoxtralConfig.from_dict(REAL_PARAMS)
    assert config.codec.samples_per_frame == 1920 and config.codec.sampling_rate == 24000
    assert config.codec.first_window == 2 and config.acoustic.decoding_steps == 7
    assert list(config.voices)[:5] == ["casual_female", "casual_male", "cheerful_female", "neutral_female", "neutral_male"]
    assert len(config.voices) == 20


def test_detected_from_params_json_with_or_without_model_type(tmp_path):
    families.discover()
    path = build(tmp_path / "tiny")
    assert families.family_for_checkpoint(path).name == "voxtral"
    params = json.loads((path / "params.json").read_text())
    del params["model_type"]
    (path / "params.json").write_text(json.dumps(params))
    assert families.family_for_checkpoint(path).name == "voxtral"


def _rewrite(path: Path, change) -> None:
    weights = load_file(str(path / "consolidated.safetensors"))
    change(weights)
    save_file(weights, str(path / "consolidated.safetensors"))


def test_a_missing_or_unknown_tensor_fails_by_name(tmp_path):
    path = build(tmp_path / "missing")
    _rewrite(path, lambda w: w.pop("acoustic_transformer.layers.1.attention.wv.weight"))
    with pytest.raises(ValueError, match=r"missing \['acoustic_transformer.layers.1.attention.wv.weight'\]"):
        load_modules(path)
    path = build(tmp_path / "misshapen")
    _rewrite(path, lambda w: w.update({"norm.weight": torch.ones(65)}))
    with pytest.raises(ValueError, match=r"misshapen \['norm.weight \(65,\) \(params.json says \(64,\)\)'\]"):
        load_modules(path)
    path = build(tmp_path / "unknown")
    _rewrite(path, lambda w: w.update({"audio_tokenizer.decoder_blocks.1.layers.0.attention.extra": torch.zeros(2)}))
    with pytest.raises(ValueError, match=r"unexpected \['audio_tokenizer.decoder_blocks.1.layers.0.attention.extra'\]"):
        load_modules(path)


def test_the_encoder_loads_when_present_whole_and_ref_audio_needs_it(tmp_path):
    open_release = load_modules(build(tmp_path / "open"))
    full = load_modules(build(tmp_path / "full", encoder=True))
    assert not open_release.encoder_weights and full.encoder_weights
    clip = ReferenceAudio(samples=np.zeros(2400, dtype=np.float32), sample_rate=24000)
    adapter = VoxtralAdapter(tuple(open_release.voices), 24000, open_release.encoder_weights)
    with pytest.raises(InvalidField, match="requires the full Voxtral checkpoint with encoder weights") as error:
        adapter.stage_input(RequestParams(model="m", voice="", reference=clip))
    assert error.value.field == "ref_audio" and not adapter.capabilities.voice_cloning
    adapter = VoxtralAdapter(tuple(full.voices), 24000, full.encoder_weights)
    assert adapter.capabilities.voice_cloning
    assert adapter.stage_input(RequestParams(model="m", voice="", reference=clip)).reference[1] == 24000
    assert adapter.stage_input(RequestParams(model="m", voice="fr_female", reference=clip)).reference is None  # the preset wins
    path = build(tmp_path / "partial", encoder=True)
    _rewrite(path, lambda w: w.pop("audio_tokenizer.encoder_blocks.7.conv.parametrizations.weight.original1"))
    with pytest.raises(ValueError, match=r"missing \['audio_tokenizer.encoder_blocks.7.conv.parametrizations.weight.original1'\]"):
        load_modules(path)


def test_a_preset_without_its_file_is_not_offered_and_a_misshapen_one_fails(tmp_path):
    path = build(tmp_path / "voices")
    (path / "voice_embedding" / "fr_female.pt").unlink()
    assert list(load_modules(path).voices) == ["casual_male", "neutral_female", "neutral_male"]
    torch.save(torch.zeros(7, 64), path / "voice_embedding" / "casual_male.pt")
    with pytest.raises(ValueError, match="casual_male.pt"):
        load_modules(path)
    shutil.rmtree(path)


def test_tekken_and_params_must_agree_on_the_audio_ids(tmp_path):
    path = build(tmp_path / "ids")
    params = json.loads((path / "params.json").read_text())
    params["multimodal"]["audio_model_args"]["audio_token_id"] = 23
    (path / "params.json").write_text(json.dumps(params))
    with pytest.raises(ValueError, match=r"\[AUDIO\]': \(24, 23\)"):
        load_modules(path)
