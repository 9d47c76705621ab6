"""ref_audio on a real server: DNS rebinding, IPv6 forms that embed an internal IPv4, local paths, what messages tell."""

from __future__ import annotations

import http.server
import json
import threading

import httpx
import pytest

from tests.e2e.test_voices import clip
from tests.serving import start_server
from vocalis.stages.models._template.build import build_checkpoint

PUBLIC = "93.184.215.14"
"""A global address: what the rebinding DNS answers first, when the server checks the host."""
DNS = {
    "rebind.test": [PUBLIC, "127.0.0.1"],
    "nat64.test": ["64:ff9b::7f00:1"],
    "local-nat64.test": ["64:ff9b:1::5db8:d70e"],
    "sixtofour.test": ["2002:7f00:1::"],
    "compat.test": ["::7f00:1"],
    "mapped.test": ["::ffff:10.0.0.1"],
    "teredo.test": ["2001:0:4136:e378:8000:63bf:3fff:fdd2"],
}


class ClipHandler(http.server.BaseHTTPRequestHandler):
    hits = 0
    body = clip(seed=5)

    def do_GET(self) -> None:  # noqa: N802
        type(self).hits += 1
        self.send_response(200)
        self.send_header("content-type", "audio/wav")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def clip_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ClipHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    root = tmp_path_factory.mktemp("ref-audio")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
    refs = root / "operator-secret-refs"
    refs.mkdir()
    (refs / "good.wav").write_bytes(clip(seed=6))
    log = root / "dns.log"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VOCALIS_TEST_DNS", json.dumps(DNS))
        patch.setenv("VOCALIS_TEST_DNS_LOG", str(log))
        server = start_server(
            root, "--family-module", "tests.e2e.scripted_dns", *(f"--allow-ref-audio-host={host}" for host in DNS),
            "--ref-audio-dir", str(refs), str(checkpoint),
        )
    server.dns_log = log
    server.refs = refs
    yield server
    server.stop()


def speak(server, **body) -> httpx.Response:
    payload = {"input": "hello there", "max_new_tokens": 20, "response_format": "pcm", **body}
    return httpx.post(f"{server.http_url}/v1/audio/speech", json=payload, timeout=60)


def test_dns_rebinding_cannot_reach_loopback(running, clip_server):
    response = speak(running, ref_audio=f"http://rebind.test:{clip_server}/voice.wav")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "ref_audio"
    assert ClipHandler.hits == 0  # the second answer (127.0.0.1) was never asked for, let alone connected to
    assert running.dns_log.read_text().split() == ["rebind.test", PUBLIC]


@pytest.mark.parametrize("host", [h for h in DNS if h != "rebind.test"])
def test_ipv6_forms_embedding_internal_ipv4_are_refused(running, clip_server, host):
    response = speak(running, ref_audio=f"http://{host}:{clip_server}/voice.wav")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "ref_audio" and "loopback or private" in error["message"]
    assert ClipHandler.hits == 0


def test_local_paths_keep_the_directory_to_themselves(running):
    assert speak(running, ref_audio="./good.wav").status_code == 200
    for outside in ("/etc/passwd", "../../../../etc/passwd", f"file://{running.refs}/missing.wav"):
        response = speak(running, ref_audio=outside)
        assert response.status_code == 400, response.text
        message = response.json()["error"]["message"]
        assert "operator-secret-refs" not in message and "reference audio directory" in message, message
    for nul in ("./good.wav\0.txt", "file:///etc/passwd%00"):
        response = speak(running, ref_audio=nul)
        assert response.status_code == 400 and response.json()["error"]["param"] == "ref_audio", response.text
    assert running.alive()
    assert "Traceback" not in running.log_path.read_text()


def test_unknown_voice_messages_do_not_list_other_callers_voices(running):
    files = {"audio_sample": ("v.wav", clip(seed=7), "audio/wav")}
    uploaded = httpx.post(f"{running.http_url}/v1/audio/voices", data={"name": "someone-elses", "consent": "c"}, files=files, timeout=60)
    assert uploaded.status_code == 200, uploaded.text
    try:
        for response in (
            speak(running, voice="nobody"),
            httpx.delete(f"{running.http_url}/v1/audio/voices/nobody", timeout=30),
        ):
            assert response.status_code == 404, response.text
            message = response.json()["error"]["message"]
            assert "nobody" in message and "someone-elses" not in message, message
    finally:
        httpx.delete(f"{running.http_url}/v1/audio/voices/someone-elses", timeout=30)
