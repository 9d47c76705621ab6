"""bench/flow_precision.py at CI size (the tiny CosyVoice3 and GLM-TTS checkpoints), so it cannot rot: both flows
timed under each flow setting, each mel within its setting's rounding of the float32 one."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_flow_precision_times_every_flow_setting_and_measures_the_mel_drift(tmp_path):
    out = tmp_path / "flow.json"
    load_bench("flow_precision").main(["--tiny", "--repeats", "1", "--tokens", "6", "--prompt-tokens", "10",
                                       "--work-dir", str(tmp_path), "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["family"] for r in rows] == ["cosyvoice3", "glm-tts"]
    for r in rows:
        variants = r["variants"]
        assert r["mel_frames"] == 12 and list(variants) == ["float32, nn.Linear", "float32", "bfloat16", "int8-dynamic"]
        assert all(v["median_s"] > 0 for v in variants.values())
        # packed float32 moves the mel by float32 rounding only; bfloat16 keeps 8 significant bits and int8 weights
        # ~7: over the tiny DiT's 2 blocks and 10 steps they stay well above 20 dB from float32's, and not identical
        assert variants["float32"]["mel_snr_db"] > 80
        assert 20 < variants["bfloat16"]["mel_snr_db"] < float("inf")
        assert 20 < variants["int8-dynamic"]["mel_snr_db"] < float("inf")
