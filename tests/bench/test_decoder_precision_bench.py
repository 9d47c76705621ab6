"""bench/decoder_precision.py at CI size (the tiny Qwen3-TTS checkpoint), so it cannot rot: both decoders timed,
the bfloat16 audio the float32 audio's length and close to it."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_decoder_precision_times_both_and_measures_the_drift(tmp_path):
    out = tmp_path / "decoder.json"
    load_bench("decoder_precision").main(["--tiny", "--repeats", "1", "--frames", "5", "--batch", "2", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["float32_s"] > 0 and result["bfloat16_s"] > 0
    assert result["samples"] == 5 * 1920  # 24 kHz at 12.5 frames a second
    # bfloat16 keeps 8 significant bits: each sample within a few 2^-8 steps of its magnitude, so well above 20 dB
    # and not identical (it did run in bfloat16)
    assert 20 < result["snr_db"] < float("inf") and result["max_abs_error"] > 0
