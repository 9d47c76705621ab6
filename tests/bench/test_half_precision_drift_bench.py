"""bench/half_precision_drift.py on the tiny Drama 3 checkpoint: its teacher-forced replay must feed the float32
run's codes back (else the logits it compares come from other inputs), and it reports every call's error."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench


def test_the_teacher_forced_replay_emits_the_float32_codes(tmp_path):
    out = tmp_path / "drift.json"
    load_bench("half_precision_drift").main(["--families", "drama3", "--variants", "float64,float16", "--no-teacher-forced",
                                             "--out", str(out)])
    rows = json.loads(out.read_text())["end_to_end"]
    assert [row["variant"] for row in rows] == ["float64", "float16"]
    for row in rows:
        forced = row["teacher_forced"]
        assert forced["codes_equal"], row  # free-running float16 flips codes; forced, it must not
        assert forced["mismatched_calls"] == 0
        assert len(forced["per_call"]) == forced["calls"] > 0
        assert max(forced["per_call"]) == forced["max_rel_logit_error"]
    first, total = rows[1]["generator"].rsplit(" ", 1)[1].split("/")  # "codes equal up to the first difference: 7/120"
    assert int(first) < int(total), "free-running float16 kept every code: the forcing had nothing to hold"
