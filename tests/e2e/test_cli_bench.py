"""`vocalis bench` as a subprocess against a real server: the files it writes and what they say."""

from __future__ import annotations

import json
import subprocess
import sys


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vocalis.server", "bench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vocalis.server", "bench", *args], capture_output=True, text=True, timeout=120
    )


def test_grpc_sweep_writes_json_markdown_and_plot(server, tmp_path):
    out = tmp_path / "bench.json"
    table = tmp_path / "bench.md"
    png = tmp_path / "bench.png"
    result = bench(
        "--server", server.grpc_target, "-c", "1,2", "--rate", "4", "-n", "3", "--prompts", "short", "--warmup", "1",
        "--json", str(out), "--markdown", str(table), "--plot", str(png),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "no progress output when stderr is not a terminal"
    assert result.stdout == table.read_text()
    rows = table.read_text().splitlines()
    assert rows[0].startswith("| mode | load |") and len(rows) == 2 + 3
    assert png.read_bytes()[:4] == b"\x89PNG"

    report = json.loads(out.read_text())
    assert report["protocol"] == "grpc" and report["target"] == f"grpc://{server.grpc_target}"
    assert report["prompts"]["categories"] == {"short": 8}
    assert [(level["mode"], level["load"]) for level in report["levels"]] == [("closed", 1), ("closed", 2), ("open", 4.0)]
    for level in report["levels"]:
        assert level["requests"] == level["ok"] == 3 and level["errors"] == {}
        assert level["sample_rates"] == [22050]
        assert 0 < level["ttfa_s"]["p50"] <= level["latency_s"]["p50"]
        assert level["audio_s_per_s"] > 0
        for request in level["results"]:
            # 16-bit PCM at the announced rate: a short prompt is a second or two of speech
            assert 0.5 < request["audio_s"] < 6 and request["sample_rate"] == 22050
            assert request["ttfa_s"] <= request["latency_s"]
        assert level["rtf"]["p50"] > 0


def test_http_with_a_prompt_file(server, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("The first prompt from a file.\n\nThe second prompt,\nover two lines.\n")
    out = tmp_path / "http.json"
    result = bench("--protocol", "http", "--http-url", server.http_url, "-c", "2", "-n", "4", "--warmup", "0",
                   "--prompt-file", str(texts), "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["target"] == server.http_url and report["prompts"] == {"source": str(texts), "count": 2, "categories": {"file": 2}}
    (level,) = report["levels"]
    assert level["ok"] == 4 and level["sample_rates"] == [22050]
    assert {r["words"] for r in level["results"]} == {6}


def test_errors_are_counted_by_status_and_no_server_fails_fast(server, tmp_path):
    out = tmp_path / "errors.json"
    errors = start("--server", server.grpc_target, "-c", "1", "-n", "2", "--warmup", "0", "--voice", "nobody", "--json", str(out))
    unreachable = start("--server", "127.0.0.1:1", "-c", "1")
    stdout, stderr = errors.communicate(timeout=120)
    assert errors.returncode == 0, stderr
    (level,) = json.loads(out.read_text())["levels"]
    assert level["ok"] == 0 and level["errors"] == {"NOT_FOUND": 2}
    assert "NOT_FOUND x2" in stdout
    stdout, stderr = unreachable.communicate(timeout=120)
    assert unreachable.returncode == 1 and "no Vocalis server is serving at 127.0.0.1:1" in stderr
