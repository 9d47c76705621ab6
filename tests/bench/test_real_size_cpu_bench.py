"""bench/real_size_cpu.py end to end on the tiny checkpoints (Vocalis side), so the real-size benchmark cannot rot."""

from __future__ import annotations

import json

from tests.bench.bench_script import load_bench
from vocalis.stages.models.omnivoice.duration import estimate_frames


def test_real_size_bench_runs_vocalis_on_the_tiny_checkpoint(tmp_path, capsys):
    bench = load_bench("real_size_cpu")
    out = tmp_path / "real_size.json"
    bench.main(["--tiny", "--reference-python", "", "--levels", "1,2", "--frames", "3", "--steps", "4", "--out", str(out),
                "--work-dir", str(tmp_path)])
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert {(r["family"], r["side"], r["concurrency"]) for r in rows} == {(f, "vocalis", c) for f in bench.FAMILIES for c in (1, 2)}
    text_frames = estimate_frames(bench.TEXT)
    for r in rows:
        if bench.FAMILIES[r["family"]].length_from_text:
            # OmniVoice: the frames the text asks for, plus 0.1 s of silence at each end
            assert abs(r["frames_per_request"] - (text_frames + 5)) <= 5, r
        else:
            # every request runs to --frames (stop heads are not silenced in the tiny checkpoint, so at most that)
            assert 0 < r["frames_per_request"] <= 3 + 1e-6, r
        frame_rate = bench.FAMILIES[r["family"]].frame_rate
        assert r["frames_per_s"] > 0 and abs(r["frames_per_s"] / r["audio_s_per_s"] - frame_rate) < 1e-6, r
        assert 0 < r["ttfa_p50_s"] and r["rtf_p50"] > 0 and r["peak_rss_bytes"] > 2**20, r
        if bench.FAMILIES[r["family"]].lm_only_reference:  # the LM stage ends before the flow and vocoder do
            assert r["lm_frames_per_s"] >= r["frames_per_s"], r
        else:
            assert r["lm_frames_per_s"] is None, r
    assert result["ratios"] == []  # no reference side, no ratios
    printed = capsys.readouterr().out
    for family in bench.FAMILIES:
        assert f"| {family} | vocalis | 2 |" in printed
    assert "the speech LM ONLY (no codec or vocoder" in printed
    # the LM-only references' prompts, as the Vocalis side decoded from them: the clip's speech tokens after the text
    cosy = json.loads((tmp_path / "cosyvoice3-tiny-prompt.json").read_text())
    assert cosy["prompt_speech"] and all(0 <= t < cosy["speech_tokens"] for t in cosy["prompt_speech"])
    assert cosy["task_id"] == cosy["sos"] + 2 == cosy["speech_tokens"] + 2 and len(cosy["text_ids"]) > len(bench.TEXT) // 4
    glm = json.loads((tmp_path / "glm-tts-tiny-prompt.json").read_text())
    speech = [i for i in glm["ids"] if glm["audio_start"] <= i < glm["audio_start"] + glm["speech_tokens"]]
    assert speech and glm["ids"][-len(speech):] == speech and glm["ids"][-len(speech) - 1] not in speech
    # what --reference-flow's flow reads: each voice's prompt mel (two frames a token, 80 bins), its CAM++ embedding, and
    # the flow's settings as the loader read them
    for prompt in (cosy, glm):
        assert len(prompt["prompt_mel"]) == prompt["flow"]["ratio"] * len(prompt["prompt_speech"]) == 2 * len(prompt["prompt_speech"])
        assert {len(row) for row in prompt["prompt_mel"]} == {80} and len(prompt["embedding"]) == 192
        assert prompt["flow"]["steps"] == 10 and prompt["flow"]["cfg_rate"] == 0.7
    assert cosy["flow"]["chunk"] > 0 and glm["flow"]["speech_token_cfg"] is False
    # higgs-audio v2's: the plain-text chat prompt, from <|begin_of_text|> to <|audio_out_bos|>, and the budget that
    # gives --frames frames after the opening BOS frame and the delay pattern's 7 rows
    higgs = json.loads((tmp_path / "higgs-audio-v2-tiny-prompt.json").read_text())
    config = json.loads((tmp_path / "tiny" / "higgs-audio-v2" / "config.json").read_text())
    assert higgs["ids"][0] == config["bos_token_id"] and higgs["ids"][-1] == config["audio_bos_token_id"], higgs
    assert higgs["ids"].count(config["audio_bos_token_id"]) == 1 and higgs["max_new_tokens"] == 3 + 1 + config["num_codebooks"] - 1
    # Fish S2 Pro's: the text-only chat prompt (system and user turns closed), ending at <|voice|>, and its stop id
    fish = json.loads((tmp_path / "fish-speech-s2-pro-tiny-prompt.json").read_text())
    added = json.loads((tmp_path / "tiny" / "fish-speech-s2-pro" / "tokenizer.json").read_text())["added_tokens"]
    control = {t["content"]: t["id"] for t in added}
    assert fish["im_end"] == control["<|im_end|>"] and fish["ids"][-1] == control["<|voice|>"], fish
    assert fish["ids"].count(fish["im_end"]) == 2 and fish["ids"][0] == control["<|im_start|>"], fish
    # Voxtral's: the preset voice's [AUDIO] rows after [BOS] [BEGIN_AUDIO], and what its flow loop needs
    vox = json.loads((tmp_path / "voxtral-tiny-prompt.json").read_text())
    rows = vox["voice_positions"]
    assert rows and rows == list(range(2, 2 + len(rows))) and len(vox["ids"]) > len(rows) + 4, vox
    assert vox["end_audio"] == 1 and vox["decoding_steps"] > 0 and len(vox["codebook_sizes"]) > 1, vox


def test_ratios_pair_each_vocalis_level_with_the_reference_at_the_same_level():
    bench = load_bench("real_size_cpu")
    row = {"family": "f", "concurrency": 1, "frames_per_s": 10.0, "ttfa_p50_s": 0.5, "rtf_p50": 0.8, "peak_rss_bytes": 4}
    rows = [row | {"side": "vocalis"}, row | {"side": "reference", "frames_per_s": 5.0, "ttfa_p50_s": 2.0, "rtf_p50": 1.6, "peak_rss_bytes": 8},
            row | {"side": "vocalis", "concurrency": 4}]
    assert bench.ratios(rows) == [{"family": "f", "concurrency": 1, "rep": 0, "throughput_x": 2.0, "ttfa_x": 0.25, "rtf_x": 0.5, "rss_x": 0.5}]
    lm = [r | {"lm_frames_per_s": 4.0 if r["side"] == "vocalis" else 2.0} for r in rows]
    assert bench.ratios(lm)[0]["lm_throughput_x"] == 2.0 and "lm_throughput_x" in bench.over_pairs(bench.ratios(lm))[0]


def test_ratios_are_taken_within_each_pair_and_spread_over_the_pairs():
    bench = load_bench("real_size_cpu")
    row = {"family": "f", "concurrency": 1, "ttfa_p50_s": 1.0, "rtf_p50": 1.0, "peak_rss_bytes": 4}
    speeds = [(10.0, 5.0), (6.0, 2.0), (8.0, 8.0)]  # (Vocalis, reference) frames/s in three pairs
    rows = [row | {"side": side, "rep": rep, "frames_per_s": speed}
            for rep, pair in enumerate(speeds) for side, speed in zip(("vocalis", "reference"), pair, strict=True)]
    compared = bench.ratios(rows)
    assert [r["throughput_x"] for r in compared] == [2.0, 3.0, 1.0]  # not 8 / 5 of the medians
    (spread,) = bench.over_pairs(compared)
    assert spread["pairs"] == 3 and spread["throughput_x"] == (1.0, 2.0, 3.0) and spread["rss_x"] == (1.0, 1.0, 1.0)


def test_tiny_layer_types_are_stretched_to_the_published_depth():
    bench = load_bench("real_size_cpu")
    config = {"talker_config": {"num_hidden_layers": 28, "code_predictor_config": {"num_hidden_layers": 5, "layer_types": ["full_attention"] * 2}}}
    bench.fit_layer_types(config)
    assert config["talker_config"]["code_predictor_config"]["layer_types"] == ["full_attention"] * 5
    assert "layer_types" not in config["talker_config"]


def test_voxcpm2_reference_is_told_the_cpu_and_float32():
    bench = load_bench("real_size_cpu")
    config = {"architecture": "voxcpm2", "device": "cuda", "dtype": "bfloat16"}
    bench.fit_cpu(config)
    assert config == {"architecture": "voxcpm2", "device": "cpu", "dtype": "float32"}
    qwen3 = {"talker_config": {}, "dtype": "bfloat16"}
    bench.fit_cpu(qwen3)
    assert qwen3 == {"talker_config": {}, "dtype": "bfloat16"}

