"""GLM-TTS's frontend on the tiny checkpoint: the speech tokenizer against transformers (WhisperFeatureExtractor
features and WhisperEncoderLayer-built tokens, goldens from tests/goldens/glm_tts/make_tokenizer_goldens.py), strict
loading of the published speech_tokenizer key set (what the published loader drops, declared), and the voice prompt
(CAM++ embedding, tokens and 24 kHz mel cut to match, cached by content)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.tolerance import log_power_bound
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.glm_tts.config import GLMTTSConfig
from vocalis.stages.models.glm_tts.frontend import Frontend
from vocalis.stages.models.glm_tts.speech_tokenizer import SpeechTokenizer

GOLDENS = Path(__file__).parents[3] / "goldens" / "glm_tts"


def golden_clip(seconds: float = 1.5) -> np.ndarray:
    """make_tokenizer_goldens.clip, rebuilt (that script needs transformers)."""
    t = np.arange(int(seconds * 16000), dtype=np.float64) / 16000
    wave = 0.3 * np.sin(2 * np.pi * 170 * t + 3 * np.sin(2 * np.pi * 1.5 * t)) * (0.6 + 0.4 * np.sin(2 * np.pi * 2.5 * t))
    noise = np.random.default_rng(0).standard_normal(len(t)) * 0.2 * (np.sin(2 * np.pi * 3 * t) > 0.5)
    return (wave + noise).astype(np.float32)


@pytest.fixture(scope="module")
def frontend(glm_checkpoint):
    return Frontend(glm_checkpoint, GLMTTSConfig.from_dir(glm_checkpoint))


def test_features_match_whisper_feature_extractor():
    golden = load_file(str(GOLDENS / "tokenizer_goldens.safetensors"))["features"]
    clip = torch.from_numpy(golden_clip())
    ours = whisper_log_mel(torch.nn.functional.pad(clip, (0, (-len(clip)) % 640)), 128)
    assert ours.shape == golden.shape
    # (log10 of the mel power + 4) / 4, the power from a 400-point FFT through 201-bin filters
    tolerance = log_power_bound(10 ** (4 * golden.double() - 4), 0, 400 + 201) / (4 * torch.tensor(10.0).log())
    assert ((ours - golden).abs() <= tolerance).all()


def test_tokens_match_transformers_whisper_layers(frontend):
    golden = load_file(str(GOLDENS / "tokenizer_goldens.safetensors"))["tokens"].tolist()
    assert frontend.speech_tokenizer(golden_clip()) == golden
    assert len(golden) == 38 and len(set(golden)) > 1  # 25 Hz over 1.5 s, more than one code


def test_loading_is_strict_on_the_published_key_set(glm_checkpoint, tmp_path):
    state = load_file(str(glm_checkpoint / "speech_tokenizer" / "model.safetensors"))
    assert "model.encoder.layers.2.fc1.weight" in state and "model.encoder.ema_weight" in state  # dropped, as published
    folder = tmp_path / "speech_tokenizer"
    folder.mkdir()
    (folder / "config.json").write_text((glm_checkpoint / "speech_tokenizer" / "config.json").read_text())
    broken = {k: v for k, v in state.items() if k != "model.encoder.layers.1.fc2.bias"} | {"model.encoder.surprise": torch.zeros(1)}
    save_file(broken, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match=r"layers\.1\.fc2\.bias.*surprise"):
        SpeechTokenizer(folder)


def test_voice_prompt_is_cut_to_match_and_cached(frontend):
    rate = 24000
    t = np.arange(int(3.3 * rate)) / rate
    clip = (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    voice = frontend.prompt(clip, rate)
    assert voice.embedding.shape == (192,)
    assert len(voice.speech_tokens) == 82 and voice.mel.shape == (164, 80)  # 25 Hz tokens, 50 Hz mel, both whole
    assert frontend.prompt(clip.copy(), rate) is voice
    with pytest.raises(ValueError, match="at most 30 s"):
        frontend.prompt(np.zeros(31 * 16000, dtype=np.float32), 16000)
