"""A prompt the KV cache cannot hold is a request error, and a cache that ends generation early says so.

The tiny family is served with a 40-position talker cache; its prompt is the input's UTF-8 bytes plus one BOS."""

from __future__ import annotations

import io
import json

import grpc
import httpx
import pytest
import soundfile as sf

from tests.serving import start_server
from vocalis.stages.models._template.build import build_checkpoint
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

HOP = 160
MAX_LEN = 40
LONG = "a" * 60  # 61 prompt positions
SHORT = "hi"  # 3 prompt positions: room for 37 frames


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("prompt-cap")
    checkpoint = build_checkpoint(root / "tiny-tts", eos_token_id=64)  # no EOS: lengths follow max_new_tokens
    overrides = json.dumps({"talker": {"max_len": MAX_LEN}, "code2wav": {"chunk_frames": 5}})
    running = start_server(root, "--family-module", "vocalis.stages.models._template.family", "--stage-overrides", overrides, str(checkpoint))
    yield running
    running.stop()


def speech(server, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json=body, timeout=60)


def assert_prompt_refused(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["reason"] == "PROMPT_TOO_LONG" and error["param"] == "input"
    assert "prompt is 61 positions" in error["message"] and f"holds {MAX_LEN}" in error["message"], error
    assert "max_len" in error["message"] and "shorter input" in error["message"]


@pytest.mark.parametrize("extra", [
    {"response_format": "flac"},  # a whole file
    {"response_format": "wav", "stream_format": "audio"},  # chunked as it is made
    {"response_format": "pcm", "stream_format": "sse"},
])
def test_http_prompt_longer_than_the_cache_is_400(tiny, extra):
    assert_prompt_refused(speech(tiny, input=LONG, max_new_tokens=10, **extra))
    samples, rate = sf.read(io.BytesIO(speech(tiny, input=SHORT, max_new_tokens=10).content))  # the server serves on
    assert rate == 16000 and len(samples) == 10 * HOP


def grpc_session(server, text: str, max_new_tokens: int) -> list[pb.SynthesizeResponse]:
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, max_new_tokens=max_new_tokens)
    requests = [pb.SynthesizeRequest(config=config), pb.SynthesizeRequest(text=pb.TextInput(text=text))]  # then half-close
    with grpc.insecure_channel(server.grpc_target) as channel:
        return list(synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(iter(requests), timeout=60))


def test_grpc_prompt_longer_than_the_cache_is_invalid_argument(tiny):
    with pytest.raises(grpc.RpcError) as caught:
        grpc_session(tiny, LONG, 10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "prompt is 61 positions" in caught.value.details()
    audio = [r.audio for r in grpc_session(tiny, SHORT, 10) if r.WhichOneof("response") == "audio"]
    assert sum(a.num_samples for a in audio) == 10 * HOP


def test_a_cache_that_ends_generation_early_warns_once(tiny):
    responses = grpc_session(tiny, SHORT, 39)
    kinds = [r.WhichOneof("response") for r in responses]
    warnings = [r.warning for r in responses if r.WhichOneof("response") == "warning"]
    assert [(w.code, w.field) for w in warnings] == [("MAX_NEW_TOKENS_CAPPED", "max_new_tokens")], warnings
    assert "ends at 37 tokens" in warnings[0].message and f"{MAX_LEN}-position" in warnings[0].message
    assert kinds.index("warning") < kinds.index("audio")
    assert sum(r.audio.num_samples for r in responses if r.WhichOneof("response") == "audio") == 37 * HOP


@pytest.mark.parametrize(("max_new_tokens", "capped"), [(39, True), (37, False)])
def test_http_streamed_wav_carries_the_cache_warning(tiny, max_new_tokens, capped):
    response = speech(tiny, input=SHORT, max_new_tokens=max_new_tokens, response_format="wav")
    assert response.status_code == 200, response.text
    warnings = response.headers.get_list("x-vocalis-warning")
    assert any(w.startswith("MAX_NEW_TOKENS_CAPPED max_new_tokens: ") for w in warnings) == capped, warnings
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 16000 and len(samples) == 37 * HOP


def test_sse_carries_the_cache_warning_as_an_event(tiny):
    response = speech(tiny, input=SHORT, max_new_tokens=39, response_format="pcm", stream_format="sse")
    assert response.status_code == 200, response.text
    events = [json.loads(line[len("data: "):]) for line in response.text.splitlines() if line.startswith("data: {")]
    warnings = [e for e in events if e.get("code") == "MAX_NEW_TOKENS_CAPPED"]
    assert len(warnings) == 1 and warnings[0]["param"] == "max_new_tokens" and "ends at 37 tokens" in warnings[0]["message"], events
