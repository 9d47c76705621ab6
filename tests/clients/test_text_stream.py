"""`vocalis stream`: LLM-like tokens, the playback model, and one stream against a real server."""

from __future__ import annotations

import json
import wave

from click.testing import CliRunner

from vocalis.clients.text_stream import SAMPLE_ANSWER, Underruns, llm_tokens, playback_underruns, stream


def test_tokens_join_back_into_the_text():
    for text in (SAMPLE_ANSWER, "  Extraordinarily long words, split!\n\nNew paragraph...", "3.14 is pi."):
        tokens = llm_tokens(text)
        assert "".join(tokens) == text
        assert all(len(t) <= 6 or not t.strip() for t in tokens)
    assert llm_tokens("Hello, world.") == ["Hello", ",", " world", "."]


def test_playback_underruns():
    # (arrival, duration): 1 s of audio at t=0, the next at t=0.5 (in time), then one at t=3 (0.5 s late)
    assert playback_underruns([(0.0, 1.0), (0.5, 1.0), (3.0, 1.0)]) == Underruns(1, 1.0, 1.0)
    assert playback_underruns([(0.0, 2.0), (1.9, 0.5), (2.3, 0.1)]) == Underruns(0, 0.0, 0.0)
    assert playback_underruns([]) == Underruns(0, 0.0, 0.0)


def test_stream_command_reports_and_writes_the_audio(server, tmp_path):
    out = tmp_path / "answer.wav"
    text = "Sure, here it is. The second sentence comes right after the first one."
    result = CliRunner().invoke(
        stream, [text, "--server", server.grpc_target, "--rate", "200", "--baseline", "--json", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["utterances"] >= 2 and report["first_unit_text"] == "Sure, here it is."
    assert 0 < report["first_unit_complete_to_first_audio_s"] < 10 and report["first_unit_alone_s"] > 0
    assert report["chunks"] >= 2 and report["first_audio_ratio"] > 0
    # the underrun figures agree with each other: a count, their total time, the longest
    assert (report["underruns"] > 0) == (report["underrun_s"] > 0) and 0 <= report["max_underrun_s"] <= report["underrun_s"]
    with wave.open(str(out)) as wav:
        assert wav.getframerate() == 22050 and abs(wav.getnframes() / 22050 - report["audio_seconds"]) < 0.01
    human = CliRunner().invoke(stream, ["Just one line.", "--server", server.grpc_target, "--rate", "100"])
    assert human.exit_code == 0 and "underruns in real-time playback" in human.output
