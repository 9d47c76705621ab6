"""`vocalis voices list|show|create|delete` as subprocesses against a real server."""

from __future__ import annotations

import json
import subprocess
import sys

import soundfile as sf
from click.testing import CliRunner

from vocalis.clients.voices_cli import voices


def start(server, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vocalis.server", "voices", *args, "--server", server.grpc_target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run(server, *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess]:
    """Run independent commands side by side (each start-up costs a second or two)."""
    return [finish(p) for p in [start(server, *command) for command in commands]]


def test_list_and_show(server):
    piped, as_json, shown, unknown, unknown_model = run(
        server,
        ("list",),
        ("list", "--json", "--model", "en_US-joe-medium"),
        ("show", "EN_US-JOE-MEDIUM"),
        ("show", "nobody"),
        ("list", "--model", "nothing"),
    )
    # piped: a tab-separated table with a header line, nothing on stderr
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    header, *rows = piped.stdout.splitlines()
    assert header.split("\t") == ["name", "kind", "models", "language", "ref_text", "created", "description"]
    assert any(row.split("\t")[:3] == ["en_US-joe-medium", "preset", "en_US-joe-medium"] for row in rows)

    assert as_json.returncode == 0, as_json.stderr
    assert {"name": "en_US-joe-medium", "kind": "VOICE_KIND_PRESET"}.items() <= json.loads(as_json.stdout)[0].items()
    assert shown.returncode == 0 and json.loads(shown.stdout)["name"] == "en_US-joe-medium"

    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.startswith("Error: NOT_FOUND:") and "nobody" in unknown.stderr
    assert "reason: UNKNOWN_VOICE" in unknown.stderr
    assert unknown_model.returncode == 1 and "NOT_FOUND" in unknown_model.stderr


def test_create_and_delete_send_the_calls_and_report_the_answer(server, tmp_path):
    clip = tmp_path / "clip.wav"
    sf.write(clip, [0.0, 0.1, -0.1] * 8000, 16000)
    (created,) = run(server, ("create", "cli_test_voice", str(clip), "--ref-text", "Hello.", "--consent", "test-consent"))
    (deleted,) = run(server, ("delete", "cli_test_voice"))
    if created.returncode == 0:  # a server with a voice store
        assert json.loads(created.stdout)["name"] == "cli_test_voice"
        assert deleted.returncode == 0 and "deleted cli_test_voice" in deleted.stdout
    else:  # a server without one says so, and the command passes it on
        for result in (created, deleted):
            assert result.returncode == 1 and result.stdout == ""
            assert result.stderr.startswith("Error: UNIMPLEMENTED:"), result.stderr
            assert "reason: VOICE_STORE_UNAVAILABLE" in result.stderr


def test_help_has_examples():
    result = CliRunner().invoke(voices, ["--help"])
    assert result.exit_code == 0
    assert "vocalis voices create alice alice.wav" in result.output
    for command in ("list", "show", "create", "delete"):
        assert command in result.output
    result = CliRunner().invoke(voices, ["create", "--help"])
    assert "--ref-text" in result.output and "--consent" in result.output and "VOCALIS_SERVER" in result.output
