"""The demo page at `/`: served by the gateway, using only the public API; played in headless Chromium when present."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.chromium import Chromium, find_chromium

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("VOCALIS_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
IN_CI = os.environ.get("VOCALIS_CI") == "1" or os.environ.get("CI", "").lower() in ("1", "true")
"""In CI (.ci/run sets VOCALIS_CI=1) the browser test must run: a missing chromium fails it instead of skipping."""


def chromium() -> str:
    executable = find_chromium()
    if executable is None:
        if IN_CI:
            pytest.fail("chromium is missing in CI: .ci/run must install it (apt-get install chromium)")
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    return executable


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        yield client


def test_the_page_and_its_scripts_are_served(http):
    page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    assert scripts == ["/static/demo.js"]
    demo = http.get("/static/demo.js")
    assert demo.status_code == 200 and "javascript" in demo.headers["content-type"]
    for endpoint in ("/v1/models", "/v1/audio/voices", "/v1/audio/speech", "X-Sample-Rate", "/static/pcm-player.js"):
        assert endpoint in demo.text, endpoint
    worklet = http.get("/static/pcm-player.js")
    assert worklet.status_code == 200 and 'registerProcessor("pcm-player"' in worklet.text


def test_only_the_static_files_are_reachable(http):
    assert http.get("/static/nothing.js").status_code == 404
    assert http.get("/static/..%2Fdemo.py").status_code == 404
    assert http.get("/static/../demo.py").status_code == 404
    assert "/" not in http.get("/openapi.json").json()["paths"], "the page is not part of the API schema"


def test_the_page_streams_and_plays_speech(server, tmp_path):
    browser = Chromium(chromium(), tmp_path / "profile", tmp_path / "chromium.log")
    try:
        browser.open(server.http_url + "/")
        assert browser.wait_for("window.vocalisDemo && window.vocalisDemo.ready", timeout=30) is True
        assert browser.evaluate("document.getElementById('voice').value") == "en_US-joe-medium"

        for fmt, text in (("pcm", "Hello from the browser."), ("wav", "A streamed wave file.")):
            browser.evaluate(
                f"document.getElementById('format').value = '{fmt}';"
                f"document.getElementById('text').value = '{text}';"
                "document.getElementById('speak-button').click()",
                user_gesture=True,
            )
            try:
                browser.wait_for("window.vocalisDemo.done && window.vocalisDemo.playbackDone", timeout=40)
            except TimeoutError as error:  # say how far it got: the request, the stream or the audio clock
                raise AssertionError(f"{fmt}: {browser.evaluate('JSON.stringify(window.vocalisDemo)')}") from error
            time.sleep(0.3)  # the worklet's periodic reports come every 0.1 s: none may take "done" back
            stats = browser.evaluate("window.vocalisDemo")
            assert stats["playbackDone"] is True, stats
            assert stats["error"] is None and stats["format"] == fmt
            assert stats["sampleRate"] == 22050
            # every sample sent to the AudioWorklet was played, and there was a second or more of it
            assert stats["samplesQueued"] == stats["samplesPlayed"] > 22050
            assert 0 < stats["ttfaMs"] <= stats["totalMs"] and stats["rtf"] > 0
            assert browser.evaluate("document.getElementById('m-rate').textContent") == "22050 Hz"

        # the upload form posts multipart to /v1/audio/voices and shows the server's answer, whatever it is
        browser.evaluate(
            "const files = new DataTransfer();"
            "files.items.add(new File([new Uint8Array(64)], 'clip.wav', {type: 'audio/wav'}));"
            "document.getElementById('voice-file').files = files.files;"
            "document.getElementById('voice-name').value = 'browser_test';"
            "document.getElementById('voice-consent').value = 'test';"
            "document.getElementById('upload-form').requestSubmit()",
            user_gesture=True,
        )
        answer = browser.wait_for(
            "(t => t && t !== 'uploading…' && t)(document.getElementById('upload-status').textContent)", timeout=30
        )
        assert answer.startswith(("uploaded: ", "upload failed: ")), answer

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = browser.screenshot(ARTIFACTS / "demo-page.png")
        assert shot.read_bytes()[:4] == b"\x89PNG"
    finally:
        browser.close()


def _visible_inputs(browser) -> dict:
    return browser.evaluate(
        "Object.fromEntries(['speed-field', 'language-field', 'instructions-field', 'clone-fields']"
        ".map(id => [id, !document.getElementById(id).hidden]))"
    )


@pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_the_page_offers_the_inputs_the_model_takes(server, tmp_path_factory):
    from tests.serving import start_server

    omnivoice = start_server(tmp_path_factory.mktemp("demo-omnivoice"), "tests/goldens/omnivoice/tiny", timeout=120)
    tmp_path = tmp_path_factory.mktemp("demo-browser")
    browser = Chromium(find_chromium(), tmp_path / "profile", tmp_path / "chromium.log")
    try:
        browser.open(server.http_url + "/")
        assert browser.wait_for("window.vocalisDemo && window.vocalisDemo.ready", timeout=30) is True
        piper = {"speed-field": True, "language-field": True, "instructions-field": False, "clone-fields": False}
        assert _visible_inputs(browser) == piper
        browser.open(omnivoice.http_url + "/")
        assert browser.wait_for("window.vocalisDemo && window.vocalisDemo.ready", timeout=30) is True
        assert _visible_inputs(browser) == {"speed-field": True, "language-field": True, "instructions-field": True, "clone-fields": True}
        browser.evaluate(
            "document.getElementById('format').value = 'pcm';"
            "document.getElementById('text').value = 'Designed.';"
            "document.getElementById('instructions').value = 'female, low pitch';"
            "document.getElementById('speak-button').click()",
            user_gesture=True,
        )
        browser.wait_for("window.vocalisDemo.done", timeout=60)
        assert browser.evaluate("window.vocalisDemo.error") is None
    finally:
        browser.close()
        omnivoice.stop()
