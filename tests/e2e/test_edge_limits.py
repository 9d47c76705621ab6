"""Edge answers that name the limit, at a bounded cost: over-long string fields, an over-long batch, an over-long
flush_id, each refused with a status that names the field and its limit (never a gRPC metadata overflow)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import httpx
import pytest

from vocalis.clients.aio import AsyncClient
from vocalis.clients.errors import VocalisError
from vocalis.tts.v1 import audio_pb2, synthesizer_pb2_grpc
from vocalis.tts.v1 import synthesizer_pb2 as pb

MEGABYTE = "a" * 1_000_000


@pytest.mark.parametrize(("field", "limit"), [("voice", 256), ("model", 256), ("language", 64), ("instructions", 10_000)])
def test_a_megabyte_string_field_is_a_400_naming_it_and_its_limit(server, field, limit):
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hello.", field: MEGABYTE}, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field and error["reason"] == "FIELD_TOO_LONG", error
    assert f"at most {limit}" in error["message"] and len(error["message"]) < 200, error


def test_grpc_names_the_field_and_does_not_echo_it(server):
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, voice=MEGABYTE)
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = synthesizer_pb2_grpc.SynthesizerStub(channel).Synthesize(
            iter([pb.SynthesizeRequest(config=config), pb.SynthesizeRequest(text=pb.TextInput(text="Hello."))]), timeout=60
        )
        with pytest.raises(grpc.RpcError) as raised:
            list(call)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "voice" in raised.value.details() and "at most 256" in raised.value.details()


def test_an_unknown_long_model_name_is_bounded_in_the_status(server):
    """Under the limit but unknown: the 404 quotes the name, and any status message is cut before it is sent."""
    response = httpx.get(f"{server.http_url}/v1/models/{'m' * 250}", timeout=60)
    assert response.status_code == 404, response.text


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_ten_megabyte_batch_of_a_million_items_is_refused_cheaply(server):
    body = b'{"items": [' + b",".join([b'{"inputs": 1}'] * 1_000_000) + b"]}"
    assert len(body) > 10_000_000
    before = _peak_rss_mib(server.process.pid)
    response = httpx.post(f"{server.http_url}/v1/audio/speech/batch", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "items" and error["reason"] == "TOO_MANY_ITEMS" and "at most 32" in error["message"], error
    assert _peak_rss_mib(server.process.pid) - before < 100
    ok = httpx.post(f"{server.http_url}/v1/audio/speech/batch", json={"items": [{"input": "Hi."}] * 2}, timeout=60)
    assert ok.status_code == 200 and ok.json()["succeeded"] == 2


def test_a_megabyte_flush_id_is_invalid_argument_naming_it(server):
    async def flood() -> VocalisError:
        async with AsyncClient(server.grpc_target, timeout=60) as client:
            session = await client.session(pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM))
            await session.send("Hello there.")
            with pytest.raises(VocalisError) as raised:
                for _ in range(5):
                    await session.flush(MEGABYTE)
                async for _ in session:
                    pass
            return raised.value

    error = asyncio.run(flood())
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT, (error.code, error.message)
    assert error.reason == "FLUSH_ID_TOO_LONG" and "256" in error.message
