"""bench/flow_precision.py at CI size (the tiny CosyVoice3 and GLM-TTS checkpoints), so it cannot rot: both flows
timed, the bfloat16 DiT's mel the float32 one's shape and within its rounding."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_flow_precision_times_both_dtypes_and_measures_the_mel_drift(tmp_path):
    out = tmp_path / "flow.json"
    load_bench("flow_precision").main(["--tiny", "--repeats", "1", "--tokens", "6", "--prompt-tokens", "10",
                                       "--work-dir", str(tmp_path), "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["family"] for r in rows] == ["cosyvoice3", "glm-tts"]
    for r in rows:
        assert r["mel_frames"] == 12 and r["float32_median_s"] > 0 and r["bfloat16_median_s"] > 0
        # bfloat16 keeps 8 significant bits: over the tiny DiT's 2 blocks and 10 steps the mel stays well above 20 dB
        # from float32's, and not identical (the DiT did run in bfloat16)
        assert 20 < r["mel_snr_db"] < float("inf")
