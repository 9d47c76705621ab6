"""A two-stage neural family served end to end: the tiny test checkpoint over HTTP and gRPC."""

from __future__ import annotations

import io
import threading

import grpc
import httpx
import pytest
import soundfile as sf

from tests.serving import start_server
from vocalis.clients.errors import VocalisError
from vocalis.clients.sync import Client
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.stages.models._template.runtime import POISON
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

HOP = 160


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-server")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)  # no EOS: lengths follow max_new_tokens
    running = start_server(
        root, "--family-module", "vocalis.stages.models._template.family", "--stage-overrides", '{"code2wav": {"chunk_frames": 5}}',
        "--max-queued-requests", "8", str(checkpoint),
    )
    yield running
    running.stop()


def config(**fields) -> pb.SessionConfig:
    extra = fields.pop("extra_params", None)
    message = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, **fields)
    if extra:
        message.extra_params.update(extra)
    return message


def test_http_wav_at_the_model_rate(tiny):
    response = httpx.post(f"{tiny.http_url}/v1/audio/speech", json={"input": "hello", "max_new_tokens": 30}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.headers["x-sample-rate"] == "16000"
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 16000 and len(samples) == 30 * HOP and samples.std() > 0.05


def test_grpc_streams_a_one_frame_first_chunk(tiny):
    with Client(tiny.grpc_target, timeout=60) as client:
        chunks = [r.audio for r in client.stream(config(max_new_tokens=26), "stream me") if r.WhichOneof("response") == "audio"]
    assert [c.num_samples for c in chunks] == [HOP] + [5 * HOP] * 5
    assert sum(len(c.audio) for c in chunks) == 26 * HOP * 2


def test_initial_chunk_per_request(tiny):
    with Client(tiny.grpc_target, timeout=60) as client:
        cfg = config(max_new_tokens=12, initial_codec_chunk_frames=4)
        chunks = [r.audio for r in client.stream(cfg, "first chunk") if r.WhichOneof("response") == "audio"]
    assert [c.num_samples // HOP for c in chunks] == [4, 5, 3]


def test_seeded_sampling_reproduces(tiny):
    with Client(tiny.grpc_target, timeout=60) as client:
        sampled = {"temperature": 0.8, "top_k": 30}
        a = client.synthesize(config(max_new_tokens=20, seed=5, extra_params=sampled), "seeded").audio
        b = client.synthesize(config(max_new_tokens=20, seed=5, extra_params=sampled), "seeded").audio
        c = client.synthesize(config(max_new_tokens=20, seed=6, extra_params=sampled), "seeded").audio
    assert a == b and a != c


def test_cancel_one_others_unaffected(tiny):
    results: dict[int, int] = {}

    def run(i: int) -> None:
        with Client(tiny.grpc_target, timeout=60) as client:
            results[i] = len(client.synthesize(config(max_new_tokens=80), f"concurrent {i}").audio)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    with grpc.insecure_channel(tiny.grpc_target) as channel:
        stub = synthesizer_pb2_grpc.SynthesizerStub(channel)
        call = stub.Synthesize(iter([pb.SynthesizeRequest(config=config(max_new_tokens=400)), pb.SynthesizeRequest(text=pb.TextInput(text="cancel me"))]))
        for response in call:
            if response.WhichOneof("response") == "audio":
                call.cancel()
                break
        with pytest.raises(grpc.RpcError) as caught:
            list(call)
        assert caught.value.code() == grpc.StatusCode.CANCELLED
    for thread in threads:
        thread.join()
    assert results == {i: 80 * HOP * 2 for i in range(3)}


def test_stage_failure_is_internal_with_the_cause_and_the_server_goes_on(tiny):
    with Client(tiny.grpc_target, timeout=60) as client:
        with pytest.raises(VocalisError) as caught:
            client.synthesize(config(), f"poison {POISON} here")
        assert caught.value.code == grpc.StatusCode.INTERNAL
        assert "BEL" in caught.value.message and "talker" in caught.value.message
        assert len(client.synthesize(config(max_new_tokens=10), "next").audio) == 10 * HOP * 2


def test_unsupported_fields_and_params(tiny):
    response = httpx.post(f"{tiny.http_url}/v1/audio/speech", json={"input": "x", "speed": 4.5}, timeout=30)
    assert response.status_code == 400 and response.json()["error"]["param"] == "speed"  # 0.25 to 4: the encoder's stretch
    response = httpx.post(f"{tiny.http_url}/v1/audio/speech", json={"input": "x", "extra_params": {"top_p": 0}}, timeout=30)
    assert response.status_code == 400 and "top_p" in response.json()["error"]["message"]
