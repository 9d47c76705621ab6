"""bench/precision_real_size.py at CI size (the tiny Qwen3-TTS checkpoint), so it cannot rot: a generator variant
and a variant with the decoder in bfloat16 each load with their settings and serve audio at every level."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_precision_variants_serve_on_the_tiny_checkpoint(tmp_path):
    out = tmp_path / "precision.json"
    variants = ["float32", "int8-dynamic + bfloat16 decoder"]
    load_bench("precision_real_size").main(["--tiny", "--repeats", "1", "--levels", "1,2", "--frames", "6",
                                            "--variants", ",".join(variants), "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["variant"], r["concurrency"]) for r in rows] == [(v, c) for v in variants for c in (1, 2)]
    assert rows[2]["settings"] == {"quantize": "int8-dynamic", "decoder_dtype": "bfloat16"}
    assert all(0 < r["frames_per_s"][0] and 0 < r["rtf_p50"][0] for r in rows)
    # the bfloat16 decoder halves its weights' bytes: the variant's model holds fewer than float32's
    assert rows[2]["weight_bytes"] < rows[0]["weight_bytes"]
