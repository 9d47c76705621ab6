"""What the clients put on the wire: API key metadata and deadlines, against a stand-in Voices server."""

from __future__ import annotations

import time
from concurrent import futures

import grpc
import pytest

from vocalis.clients import AsyncClient, Client, errors
from vocalis.tts.v1 import voices_pb2, voices_pb2_grpc


class StandInVoices(voices_pb2_grpc.VoicesServicer):
    """ListVoices answers with the caller's metadata; GetVoice takes a second; CreateVoice echoes the upload."""

    def ListVoices(self, request, context):
        metadata = dict(context.invocation_metadata())
        return voices_pb2.ListVoicesResponse(voices=[
            voices_pb2.Voice(name="auth", description=metadata.get("authorization", "")),
            voices_pb2.Voice(name="team", description=metadata.get("x-team", "")),
        ])

    def GetVoice(self, request, context):
        time.sleep(1.0)
        return voices_pb2.GetVoiceResponse(voice=voices_pb2.Voice(name=request.name))

    def CreateVoice(self, request, context):
        return voices_pb2.CreateVoiceResponse(
            voice=voices_pb2.Voice(name=request.name, description=f"{len(request.audio)} bytes {request.mime_type}")
        )

    def DeleteVoice(self, request, context):
        context.abort(grpc.StatusCode.NOT_FOUND, f"no voice {request.name!r}")


@pytest.fixture(scope="module")
def target():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    voices_pb2_grpc.add_VoicesServicer_to_server(StandInVoices(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


def test_sync_client_sends_the_api_key_and_metadata(target):
    with Client(target, timeout=5, api_key="secret-1", metadata=[("X-Team", "blue")]) as client:
        voices = {v.name: v.description for v in client.list_voices()}
    assert voices == {"auth": "Bearer secret-1", "team": "blue"}


def test_no_api_key_no_authorization_header(target):
    with Client(target, timeout=5) as client:
        assert {v.name: v.description for v in client.list_voices()}["auth"] == ""


async def test_async_client_sends_the_api_key(target):
    async with AsyncClient(target, timeout=5, api_key="secret-2") as client:
        voices = {v.name: v.description for v in await client.list_voices()}
    assert voices["auth"] == "Bearer secret-2"


def test_a_passed_deadline_is_a_typed_error(target):
    with Client(target, timeout=30) as client:
        with pytest.raises(errors.DeadlineExceeded):
            client.get_voice("slow", timeout=0.1)


async def test_async_deadline(target):
    async with AsyncClient(target, timeout=0.1) as client:
        with pytest.raises(errors.DeadlineExceeded):
            await client.get_voice("slow")


def test_voice_upload_and_a_typed_failure(target, tmp_path):
    clip = tmp_path / "clip.flac"
    clip.write_bytes(b"x" * 10)
    with Client(target, timeout=5) as client:
        assert client.create_voice("alice", clip).description == "10 bytes audio/flac"
        with pytest.raises(errors.NotFound, match="no voice 'bob'"):
            client.delete_voice("bob")


def test_unreachable_server_is_unavailable():
    with Client("127.0.0.1:1", timeout=2) as client:
        with pytest.raises(errors.Unavailable):
            client.list_voices()
        assert client.serving() is False
