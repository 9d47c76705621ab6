"""Voices end to end: upload, list, clone, delete; validation; two processes on one store; concurrency."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.serving import start_server
from vocalis.clients.errors import VocalisError, from_rpc_error
from vocalis.clients.sync import Client
from vocalis.server.voice_store import VoiceStore
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2, voices_pb2, voices_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb


def clip(seconds: float = 2.0, rate: int = 16000, amplitude: float = 0.3, fmt: str = "WAV", seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t)
    signal = amplitude * envelope * np.sin(2 * np.pi * 220 * t) + 0.01 * rng.standard_normal(len(t))
    buffer = io.BytesIO()
    sf.write(buffer, signal.astype(np.float32), rate, format=fmt)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("voices")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
    precomputed = root / "precomputed"
    precomputed.mkdir()
    (precomputed / "narrator.wav").write_bytes(clip(3.0, seed=9))
    (precomputed / "manifest.json").write_text(
        json.dumps({"voices": [{"name": "narrator", "audio": "narrator.wav", "ref_text": "A narrator.", "description": "calm"}]})
    )
    common = ("--family-module", "vocalis.stages.models._template.family", "--voice-dir", str(root / "store"), "--custom-voice-dir", str(precomputed))
    first = start_server(root, *common, "--max-voices", "60", str(checkpoint))
    second = start_server(root, *common, "--max-voices", "60", str(checkpoint))
    yield first, second
    first.stop()
    second.stop()


def upload(server, name: str, data: bytes | None = None, **form) -> httpx.Response:
    files = {"audio_sample": ("voice.wav", clip() if data is None else data, form.pop("mime", "audio/wav"))}
    fields = {"name": name, "consent": "consent-1", **form}
    return httpx.post(f"{server.http_url}/v1/audio/voices", data=fields, files=files, timeout=60)


def names(server) -> set[str]:
    return set(httpx.get(f"{server.http_url}/v1/audio/voices", timeout=30).json()["voices"])


def speak(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "hello there", "max_new_tokens": 20, "response_format": "pcm", **body}, timeout=60)


def test_upload_list_clone_delete_across_two_processes(servers):
    first, second = servers
    response = upload(first, "Alice", ref_text="Hello, I am Alice.", speaker_description="test voice")
    assert response.status_code == 200, response.text
    voice = response.json()["voice"]
    assert voice["kind"] == "VOICE_KIND_UPLOADED" and voice["has_ref_text"] and voice["models"] == ["tiny-tts"]
    assert abs(voice["duration_seconds"] - 2.0) < 0.01
    listing = httpx.get(f"{second.http_url}/v1/audio/voices", timeout=30).json()
    assert "Alice" in listing["voices"] and [v["name"] for v in listing["uploaded_voices"]] == ["Alice"]
    assert {"tiny", "narrator"} <= set(listing["voices"])

    default = speak(second).content
    cloned = speak(second, voice="alice")
    assert cloned.status_code == 200, cloned.text
    assert cloned.content != default and len(cloned.content) == 20 * 160 * 2
    with Client(second.grpc_target, timeout=60) as client:
        over_grpc = client.synthesize(pb.SessionConfig(voice="ALICE", encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=20), "hello there")
    assert over_grpc.audio == cloned.content and over_grpc.started.voice == "Alice"

    assert httpx.delete(f"{second.http_url}/v1/audio/voices/alice", timeout=30).json()["success"]
    assert "Alice" not in names(first)
    gone = speak(first, voice="Alice")
    assert gone.status_code == 404 and gone.json()["error"]["param"] == "voice"
    with Client(first.grpc_target, timeout=60) as client, pytest.raises(VocalisError) as caught:
        client.synthesize(pb.SessionConfig(voice="Alice", max_new_tokens=5), "x")
    assert caught.value.code == grpc.StatusCode.NOT_FOUND


def test_inline_reference_and_precomputed_voice(servers):
    first, _ = servers
    inline = speak(first, ref_audio=base64.b64encode(clip(seed=4)).decode())
    data_url = speak(first, ref_audio="data:audio/wav;base64," + base64.b64encode(clip(seed=4)).decode())
    assert inline.status_code == 200 and inline.content == data_url.content != speak(first).content
    narrator = speak(first, voice="narrator")
    assert narrator.status_code == 200 and narrator.content != speak(first).content
    refused = httpx.delete(f"{first.http_url}/v1/audio/voices/narrator", timeout=30)
    assert refused.status_code == 400 and "precomputed" in refused.json()["error"]["message"]


def test_failed_reupload_keeps_the_old_voice(servers):
    first, second = servers
    assert upload(first, "keeper").status_code == 200
    before = speak(second, voice="keeper").content
    bad = upload(first, "keeper", b"RIFF....WAVEnot really audio")
    assert bad.status_code == 400 and "audio" in bad.json()["error"]["message"]
    assert speak(second, voice="keeper").content == before
    assert httpx.delete(f"{first.http_url}/v1/audio/voices/keeper", timeout=30).status_code == 200


def silent() -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, np.zeros(32000, np.float32), 16000, format="WAV")
    return buffer.getvalue()


BAD_UPLOADS = [
    ({"name": "big", "data": b"\0" * (11 * 1024 * 1024)}, 400, "MiB"),
    ({"name": "short", "data": clip(0.5)}, 400, "0.50 s"),
    ({"name": "long", "data": clip(31.0, rate=8000)}, 400, "30 s"),
    ({"name": "quiet", "data": silent()}, 400, "silent"),
    ({"name": "fake", "data": b"this is not audio at all" * 100, "mime": "audio/mpeg"}, 400, "not audio"),
    ({"name": "../x"}, 400, "name"),
    ({"name": ""}, 400, "name"),
    ({"name": "tiny"}, 400, "preset"),
    ({"name": "nocon", "consent": ""}, 400, "consent"),
]


@pytest.mark.parametrize(("case", "status", "text"), BAD_UPLOADS, ids=[c[0]["name"] or "empty" for c in BAD_UPLOADS])
def test_bad_uploads_change_nothing(servers, case, status, text):
    first, _ = servers
    before = names(first)
    case = dict(case)
    response = upload(first, case.pop("name"), case.pop("data", None), **case)
    assert response.status_code == status, response.text
    assert text.lower() in response.json()["error"]["message"].lower()
    assert names(first) == before


@pytest.mark.parametrize(
    ("ref_audio", "text"),
    [
        ("http://127.0.0.1:9/voice.wav", "not allowed"),
        ("/etc/passwd", "local paths"),
        ("A" * (15 * 1024 * 1024), "MiB"),
        ("not base64 !!", "base64"),
    ],
    ids=["loopback-url", "local-path", "oversized-base64", "garbage"],
)
def test_bad_inline_references(servers, ref_audio, text):
    first, _ = servers
    response = speak(first, ref_audio=ref_audio)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "ref_audio" and text.lower() in error["message"].lower()


def test_parallel_uploads_and_deletes(servers):
    first, second = servers
    before = names(first)

    def work(i: int) -> None:
        server = servers[i % 2]
        assert upload(server, f"bulk-{i}", clip(1.2, seed=i)).status_code == 200
        if i % 3 == 0:
            assert httpx.delete(f"{server.http_url}/v1/audio/voices/bulk-{i}", timeout=30).status_code == 200

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(50)))
    expected = before | {f"bulk-{i}" for i in range(50) if i % 3}
    assert names(first) == names(second) == expected
    with grpc.insecure_channel(first.grpc_target) as channel:
        listed = voices_pb2_grpc.VoicesStub(channel).ListVoices(voices_pb2.ListVoicesRequest())
    assert {v.name for v in listed.voices} == expected
    for i in range(50):
        if i % 3:
            httpx.delete(f"{first.http_url}/v1/audio/voices/bulk-{i}", timeout=30)


def test_piper_cannot_use_a_cloned_voice(server, tmp_path):
    response = upload(server, "cloned")
    assert response.status_code == 200, response.text
    assert response.json()["voice"]["models"] == []
    refused = httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hi.", "voice": "cloned"}, timeout=30)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "voice" and "cannot use" in refused.json()["error"]["message"]
    assert httpx.delete(f"{server.http_url}/v1/audio/voices/cloned", timeout=30).status_code == 200


def silent_hour_flac(known_length: bool = True) -> bytes:
    """An hour of 8 kHz silence: 90 KB of FLAC for 115 MB of samples. Without `known_length`, its header leaves the length blank."""
    buffer = io.BytesIO()
    with sf.SoundFile(buffer, "w", 8000, 1, format="FLAC", subtype="PCM_16") as sound:
        block = np.zeros(8000 * 600, np.int16)
        for _ in range(6):
            sound.write(block)
    data = bytearray(buffer.getvalue())
    if not known_length:  # STREAMINFO's 36-bit total-samples field, at bytes 18..26 of the file, set to 0 ("unknown")
        word = int.from_bytes(data[18:26], "big") & ~((1 << 36) - 1)
        data[18:26] = word.to_bytes(8, "big")
    return bytes(data)


def zero_bit_wav() -> bytes:
    data = bytearray(clip())
    data[34:36] = (0).to_bytes(2, "little")  # bits per sample
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (silent_hour_flac(), "3600.0 s long"),  # refused from the header, before decoding anything
        (silent_hour_flac(known_length=False), "more than 30"),  # decoded until it passed the limit, then dropped
        (zero_bit_wav(), "0 bits per sample"),
    ],
    ids=["bomb-with-header", "bomb-without-length", "zero-bit-wav"],
)
def test_hostile_audio_is_a_400(servers, data, text):
    first, _ = servers
    before = names(first)
    response = upload(first, "hostile", data, mime="audio/flac")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "audio_sample" and text in response.json()["error"]["message"]
    inline = speak(first, ref_audio=base64.b64encode(data).decode())
    assert inline.status_code == 400 and inline.json()["error"]["param"] == "ref_audio", inline.text
    assert text in inline.json()["error"]["message"]
    assert names(first) == before and first.alive()
    assert "Traceback" not in first.log_path.read_text()


@pytest.mark.parametrize(("field", "limit"), [("speaker_description", 1000), ("ref_text", 2000), ("consent", 256)])
def test_voice_text_fields_are_bounded(servers, field, limit):
    first, _ = servers
    form = {field: "x" * (limit + 1)}
    response = upload(first, "wordy", **form)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field and str(limit) in error["message"]
    with grpc.insecure_channel(first.grpc_target) as channel, pytest.raises(grpc.RpcError) as caught:
        request = voices_pb2.CreateVoiceRequest(name="wordy", audio=clip(), **{"consent": "c", **form})
        voices_pb2_grpc.VoicesStub(channel).CreateVoice(request, timeout=30)
    refusal = from_rpc_error(caught.value)
    assert refusal.code == grpc.StatusCode.INVALID_ARGUMENT and refusal.field == field
    assert upload(first, "wordy", **{field: "x" * limit}).status_code == 200
    assert httpx.delete(f"{first.http_url}/v1/audio/voices/wordy", timeout=30).status_code == 200


@pytest.fixture
def many_voices(servers, tmp_path):
    """620 uploaded voices, written straight into the store both servers share (uploading them would take minutes)."""
    first, _ = servers
    store = VoiceStore(first_store_dir(first))
    created = [f"many-{i:03d}" for i in range(620)]
    for name in created:
        store.put(name, b"e", "application/json", None, "c", embedding=np.ones(4, np.float32))
    yield created
    for name in created:
        store.delete(name)


def first_store_dir(server) -> str:
    command = server.process.args
    return command[command.index("--voice-dir") + 1]


def test_listing_is_paginated_everywhere(servers, many_voices):
    first, second = servers
    everything = sorted(names(first), key=str.lower)
    assert len(everything) > 620 and set(many_voices) <= set(everything)
    with grpc.insecure_channel(second.grpc_target) as channel:
        stub = voices_pb2_grpc.VoicesStub(channel)
        default = stub.ListVoices(voices_pb2.ListVoicesRequest())
        assert len(default.voices) == 100 and default.next_page_token
        assert len(stub.ListVoices(voices_pb2.ListVoicesRequest(page_size=100000)).voices) == 500
        walked, token = [], ""
        while True:
            page = stub.ListVoices(voices_pb2.ListVoicesRequest(page_size=70, page_token=token))
            assert len(page.voices) <= 70
            walked += [v.name for v in page.voices]
            token = page.next_page_token
            if not token:
                break
        assert walked == everything
        for request, field in (
            (voices_pb2.ListVoicesRequest(page_size=-1), "page_size"),
            (voices_pb2.ListVoicesRequest(page_token="bm90IGEgdG9rZW4"), "page_token"),
            (voices_pb2.ListVoicesRequest(model="tiny-tts", page_token=default.next_page_token), "page_token"),
        ):
            with pytest.raises(grpc.RpcError) as caught:
                stub.ListVoices(request)
            assert from_rpc_error(caught.value).field == field and caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with Client(first.grpc_target, timeout=60) as client:
        assert [v.name for v in client.list_voices()] == everything
    http_pages, token = [], ""
    while True:
        params = {"limit": 250, **({"page_token": token} if token else {})}
        body = httpx.get(f"{first.http_url}/v1/audio/voices", params=params, timeout=30).json()
        http_pages += body["voices"]
        token = body["next_page_token"]
        assert body["has_more"] == bool(token)
        if not token:
            break
    assert http_pages == everything
    assert httpx.get(f"{first.http_url}/v1/audio/voices", params={"limit": 501}, timeout=30).status_code == 400
    listed = subprocess.run(
        [sys.executable, "-m", "vocalis.server", "voices", "list", "--json", "--server", first.grpc_target],
        capture_output=True, text=True, timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert [v["name"] for v in json.loads(listed.stdout)] == everything
