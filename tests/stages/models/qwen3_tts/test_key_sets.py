"""The published checkpoints' key sets: our modules hold exactly the tensors (names and shapes) that the
reference classes hold for each real configuration, so the real files load unchanged and completely.

real_key_sets.json was written by make_goldens.py (`--key-sets`) from qwen-tts 0.1.1 built on the
meta device with the public configs of Qwen/Qwen3-TTS-12Hz-{1.7B,0.6B}-{CustomVoice,VoiceDesign,Base}.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from vocalis.stages.models.qwen3_tts.codec import SpeechDecoder, SpeechEncoder
from vocalis.stages.models.qwen3_tts.config import Qwen3TTSConfig, SpeechTokenizerConfig
from vocalis.stages.models.qwen3_tts.speaker import SpeakerEncoder
from vocalis.stages.models.qwen3_tts.talker import Talker
from vocalis.stages.models.qwen3_tts.weights import fold_weight_norm

REAL = json.loads((Path(__file__).with_name("real_key_sets.json")).read_text())
SPEECH = SpeechTokenizerConfig.from_dict(REAL["speech_tokenizer"]["config"])


def ours(config: Qwen3TTSConfig) -> dict[str, list[int]]:
    with torch.device("meta"):
        keys = {f"talker.{k}": list(v.shape) for k, v in Talker(config.talker).state_dict().items()}
        if config.speaker_encoder is not None:
            keys |= {f"speaker_encoder.{k}": list(v.shape) for k, v in SpeakerEncoder(config.speaker_encoder).state_dict().items()}
    return keys


@pytest.mark.parametrize("name", sorted(REAL["checkpoints"]))
def test_model_keys_match_the_published_checkpoint(name):
    entry = REAL["checkpoints"][name]
    assert ours(Qwen3TTSConfig.from_dict(entry["config"], SPEECH)) == entry["keys"]


def test_variant_differences_are_the_structural_ones():
    keys = {name: set(entry["keys"]) for name, entry in REAL["checkpoints"].items()}
    big, small = keys["Qwen3-TTS-12Hz-1.7B-CustomVoice"], keys["Qwen3-TTS-12Hz-0.6B-CustomVoice"]
    assert big - small == {"talker.code_predictor.small_to_mtp_projection.weight", "talker.code_predictor.small_to_mtp_projection.bias"}
    assert keys["Qwen3-TTS-12Hz-1.7B-VoiceDesign"] == big
    assert {k.split(".")[0] for k in keys["Qwen3-TTS-12Hz-1.7B-Base"] - big} == {"speaker_encoder"}


def test_speech_tokenizer_keys_match():
    with torch.device("meta"):
        keys = {f"decoder.{k}": list(v.shape) for k, v in SpeechDecoder(SPEECH.decoder).state_dict().items()}
        encoder = SpeechEncoder(SPEECH.encoder, SPEECH.encoder_valid_num_quantizers, SPEECH.encode_downsample_rate)
        keys |= {f"encoder.{k}": list(v.shape) for k, v in encoder.state_dict().items()}
    assert keys == REAL["speech_tokenizer"]["keys"]


def test_layer_counts_after_normalising_indices():
    names = {re.sub(r"\.\d+\.", ".N.", k) for k in REAL["checkpoints"]["Qwen3-TTS-12Hz-1.7B-CustomVoice"]["keys"]}
    assert "talker.model.layers.N.self_attn.q_norm.weight" in names and "talker.code_predictor.lm_head.N.weight" in names
    layers = {int(k.split(".")[3]) for k in REAL["checkpoints"]["Qwen3-TTS-12Hz-1.7B-CustomVoice"]["keys"] if k.startswith("talker.model.layers.")}
    assert layers == set(range(28))


def test_both_weight_norm_spellings_fold_to_the_same_weight():
    v = torch.randn(4, 3, 5)
    g = torch.rand(4, 1, 1) + 0.5
    expected = g * v / v.flatten(1).norm(dim=1).view(-1, 1, 1)
    old = fold_weight_norm({"conv.weight_g": g, "conv.weight_v": v, "conv.bias": torch.zeros(4)})
    new = fold_weight_norm({"conv.parametrizations.weight.original0": g, "conv.parametrizations.weight.original1": v})
    assert set(old) == {"conv.weight", "conv.bias"} and set(new) == {"conv.weight"}
    torch.testing.assert_close(old["conv.weight"], expected)
    torch.testing.assert_close(new["conv.weight"], expected)
