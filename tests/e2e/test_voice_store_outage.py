"""The PostgreSQL voice store taken away and brought back under two replicas: clean, quick refusals, quick recovery.

While the database is down every voice route and RPC answers 503 (with Retry-After) / UNAVAILABLE within 2 s,
without a traceback per call in the replicas' logs; once it is back, every replica serves its voices again within 5 s.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest

from tests.fleet import voice_clip
from tests.postgres_cluster import postgres_bindir, require, start_cluster
from tests.serving import start_server
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2
from vocalis.tts.v1 import synthesizer_pb2 as pb

pytestmark = pytest.mark.timeout(180)
REFUSED_WITHIN_S = 2.0
BACK_WITHIN_S = 5.0


@pytest.fixture(scope="module")
def replicas_and_db(tmp_path_factory):
    require("postgresql", postgres_bindir() is not None)
    root = tmp_path_factory.mktemp("store-outage")
    cluster = start_cluster()
    replicas = []
    try:
        checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)
        args = ("--family-module", "vocalis.stages.models._template.family", "--voice-store", cluster.url, str(checkpoint))
        with ThreadPoolExecutor(2) as pool:
            replicas = list(pool.map(lambda _: start_server(root, *args, timeout=90), range(2)))
        yield replicas, cluster
    finally:
        for replica in replicas:
            replica.stop()
        cluster.stop()


def _http_calls(url: str) -> dict:
    upload = {"audio_sample": ("voice.wav", voice_clip(7), "audio/wav")}
    return {
        "list": lambda: httpx.get(f"{url}/v1/audio/voices", timeout=10),
        "upload": lambda: httpx.post(f"{url}/v1/audio/voices", data={"name": "Newcomer", "consent": "ok"}, files=upload, timeout=10),
        "delete": lambda: httpx.delete(f"{url}/v1/audio/voices/kept", timeout=10),
        "speech": lambda: httpx.post(f"{url}/v1/audio/speech", json={"input": "hi", "voice": "kept", "max_new_tokens": 5}, timeout=10),
    }


def _grpc_calls(client: Client) -> dict:
    config = pb.SessionConfig(voice="kept", encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=5)
    return {
        "ListVoices": lambda: client.list_voices(),
        "GetVoice": lambda: client.get_voice("kept"),
        "CreateVoice": lambda: client.create_voice("Newcomer", voice_clip(7), consent="ok"),
        "DeleteVoice": lambda: client.delete_voice("kept"),
        "Synthesize": lambda: client.synthesize(config, "hi"),
    }


def test_a_database_outage_is_refused_cleanly_and_recovered_quickly(replicas_and_db):
    replicas, cluster = replicas_and_db
    first = replicas[0]
    response = httpx.post(f"{first.http_url}/v1/audio/voices", data={"name": "Kept", "consent": "ok"},
                          files={"audio_sample": ("voice.wav", voice_clip(1), "audio/wav")}, timeout=30)
    assert response.status_code == 200, response.text
    logged_before = [r.log_path.read_text() for r in replicas]

    cluster.halt()
    try:
        slowest = 0.0
        for _ in range(3):  # the first call meets the outage, the next ones the remembered outage
            for replica in replicas:
                for name, call in _http_calls(replica.http_url).items():
                    started = time.monotonic()
                    answer = call()
                    slowest = max(slowest, time.monotonic() - started)
                    assert answer.status_code == 503, (name, answer.status_code, answer.text)
                    assert answer.headers.get("retry-after") == "1", (name, answer.headers)
                    assert answer.json()["error"]["reason"] == "VOICE_STORE_UNAVAILABLE", (name, answer.text)
                with Client(replica.grpc_target, timeout=10) as client:
                    for name, call in _grpc_calls(client).items():
                        started = time.monotonic()
                        with pytest.raises(VocalisError) as caught:
                            call()
                        slowest = max(slowest, time.monotonic() - started)
                        assert caught.value.code == grpc.StatusCode.UNAVAILABLE, (name, caught.value)
        assert slowest < REFUSED_WITHIN_S, slowest
        for replica, before in zip(replicas, logged_before, strict=True):
            during = replica.log_path.read_text()[len(before):]
            assert "Traceback" not in during, during
            assert during.count("cannot be reached") <= 3, during  # one line per outage, not one per call
    finally:
        cluster.resume()
    back = time.monotonic()
    pending = set(range(len(replicas)))
    while pending and time.monotonic() - back < BACK_WITHIN_S + 5:
        for index in sorted(pending):
            answer = httpx.get(f"{replicas[index].http_url}/v1/audio/voices", timeout=10)
            if answer.status_code == 200:
                assert "Kept" in {v["name"] for v in answer.json()["uploaded_voices"]}
                pending.discard(index)
        time.sleep(0.1)
    recovered_after = time.monotonic() - back
    assert not pending and recovered_after < BACK_WITHIN_S, (pending, recovered_after)
    for replica in replicas:
        with Client(replica.grpc_target, timeout=30) as client:
            config = pb.SessionConfig(voice="kept", encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=5)
            assert len(client.synthesize(config, "back again").audio) > 0
    assert httpx.delete(f"{replicas[1].http_url}/v1/audio/voices/kept", timeout=10).status_code == 200
    print(f"store outage: slowest refusal {slowest:.2f} s, every replica serving voices {recovered_after:.2f} s after the database returned")
