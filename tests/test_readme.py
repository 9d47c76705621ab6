"""Every example in the README runs against a real server and gives what it promises."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import soundfile as sf

from tests.audio_checks import assert_speech

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"<!-- readme-test: (?P<name>[\w-]+) -->\n```(?P<lang>\w+)\n(?P<code>.*?)```", re.S)


def examples() -> dict[str, tuple[str, str]]:
    return {m["name"]: (m["lang"], m["code"]) for m in BLOCK.finditer(README.read_text())}


def run_example(name: str, server, cwd: Path) -> subprocess.CompletedProcess:
    lang, code = examples()[name]
    code = code.replace("localhost:8091", f"127.0.0.1:{server.http_port}").replace("localhost:50051", server.grpc_target)
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ["PATH"],
        "VOCALIS_SERVER": server.grpc_target,
        "VOCALIS_HTTP_URL": server.http_url,
    }
    if lang == "bash":
        code = code.replace("vocalis say ", f"vocalis say --server {server.grpc_target} ")
        command = ["bash", "-euo", "pipefail", "-c", code]
    else:
        command = [sys.executable, "-c", code]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_the_readme_has_the_examples():
    assert set(examples()) == {
        "curl", "curl-stream", "httpx-sse", "openai", "grpcurl", "say", "client", "bench", "voices", "word-timestamps"
    }


def test_the_two_commands_are_there():
    text = README.read_text()
    assert "pip install -e '.[piper]' && .venv/bin/vocalis serve" in text
    assert "pip install -e '.[piper,neural,dev]' && .venv/bin/python -m pytest" in text
    assert "GPL-3.0" in text


def test_curl(server, tmp_path):
    run_example("curl", server, tmp_path)
    samples, rate = sf.read(tmp_path / "hello.wav")
    assert rate == 22050 and samples.ndim == 1 and len(samples) / rate > 0.5
    assert_speech(samples, rate)


def test_curl_stream(server, tmp_path):
    run_example("curl-stream", server, tmp_path)
    assert "x-sample-rate: 22050" in (tmp_path / "headers.txt").read_text().lower()
    pcm = (tmp_path / "stream.pcm").read_bytes()
    assert len(pcm) / 2 / 22050 > 1.0


def test_httpx_sse(server, tmp_path):
    run_example("httpx-sse", server, tmp_path)
    assert len((tmp_path / "sse.pcm").read_bytes()) / 2 / 22050 > 0.5


def test_openai(server, tmp_path):
    run_example("openai", server, tmp_path)
    for name in ("openai.wav", "openai.mp3"):
        samples, rate = sf.read(tmp_path / name)
        assert rate == 22050
        assert_speech(samples, rate)


def test_grpcurl(server, tmp_path):
    out = run_example("grpcurl", server, tmp_path).stdout
    assert "vocalis.tts.v1.Synthesizer" in out and '"status": "SERVING"' in out
    assert '"session_started"' in out and '"session_done"' in out


def test_say(server, tmp_path):
    run_example("say", server, tmp_path)
    for name in ("say.wav", "say-stream.wav"):
        samples, rate = sf.read(tmp_path / name)
        assert rate == 22050
        assert_speech(samples, rate)


def test_client(server, tmp_path):
    run_example("client", server, tmp_path)
    samples, rate = sf.read(tmp_path / "client.wav")
    assert rate == 22050
    assert_speech(samples, rate)
    assert len((tmp_path / "session.pcm").read_bytes()) / 2 / 22050 > 1.0


def test_bench(server, tmp_path):
    out = run_example("bench", server, tmp_path).stdout
    assert "en_US-joe-medium\tpreset" in out
    report = json.loads((tmp_path / "bench.json").read_text())
    assert [level["ok"] for level in report["levels"]] == [4, 4]
    assert (tmp_path / "bench.md").read_text() in out


def test_voices(server, tmp_path):
    run_example("voices", server, tmp_path)
    created = json.loads((tmp_path / "created.json").read_text())
    assert created["success"] and created["voice"]["name"] == "alice" and created["voice"]["models"] == []
    assert "alice" in json.loads((tmp_path / "listed.json").read_text())["voices"]
    assert json.loads((tmp_path / "deleted.json").read_text())["success"]


def test_word_timestamps(server, tmp_path):
    result = run_example("word-timestamps", server, tmp_path)
    words = ast.literal_eval(result.stdout.strip())
    assert [w[0] for w in words] == ["Every", "word", "has", "its", "time"]
    assert all(start < end for _, start, end, _, _ in words) and words[1][3:] == (6, 10)
    assert sf.info(tmp_path / "words.wav").duration * 1000 >= words[-1][2]
