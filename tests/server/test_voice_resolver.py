"""Opening a session: fields are validated before any voice is resolved, and VoiceResolver decides preset or clone."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from tests.server.fakes import FakeEngine, fake_model
from vocalis.server.config import Limits
from vocalis.server.errors import StatusError
from vocalis.server.synthesizer_service import SynthesizerService
from vocalis.server.voice_resolver import VoiceResolver
from vocalis.stages.runtime.request import ReferenceAudio
from vocalis.tts.v1 import synthesizer_pb2 as pb


class FakeReferences:
    """Stands in for ReferenceResolver: "stored" is a stored voice; every call is recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def resolve(self, config: pb.SessionConfig, model) -> ReferenceAudio | None:  # noqa: ANN001
        self.calls.append(config.voice)
        if config.voice == "stored":
            return ReferenceAudio(np.zeros(16000, np.float32), 16000, "hello", "Stored")
        return None


async def test_a_preset_is_the_models_own_name_for_it():
    voice = await VoiceResolver(FakeReferences()).resolve(pb.SessionConfig(voice="BOB"), fake_model())
    assert (voice.name, voice.preset, voice.reference) == ("bob", "bob", None)


async def test_a_stored_voice_is_cloned_under_its_own_name():
    voice = await VoiceResolver(FakeReferences()).resolve(pb.SessionConfig(voice="stored"), fake_model())
    assert (voice.name, voice.preset) == ("Stored", "") and voice.reference is not None and voice.reference.text == "hello"


async def test_an_unknown_voice_is_not_found_naming_the_field():
    with pytest.raises(StatusError) as caught:
        await VoiceResolver().resolve(pb.SessionConfig(voice="carol"), fake_model())
    assert (caught.value.code, caught.value.field) == (grpc.StatusCode.NOT_FOUND, "voice")


class AbortingContext:
    def __init__(self) -> None:
        self.status: grpc.Status | None = None

    async def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        raise grpc.aio.AbortError()


async def messages(*requests: pb.SynthesizeRequest):
    for request in requests:
        yield request


async def test_a_refused_field_is_refused_before_the_voice_is_resolved():
    references = FakeReferences()
    model = fake_model()
    engine = FakeEngine()
    engine.model = lambda name: model  # type: ignore[attr-defined]
    service = SynthesizerService(engine, Limits(), references)  # type: ignore[arg-type]
    context = AbortingContext()
    config = pb.SessionConfig(voice="stored", speed=9.0)  # out of every model's range: refused, not a warning
    with pytest.raises(grpc.aio.AbortError):
        async for _ in service.Synthesize(messages(pb.SynthesizeRequest(config=config)), context):  # type: ignore[arg-type]
            pass
    assert context.status is not None and context.status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "speed" in context.status.details
    assert references.calls == []  # nothing was fetched or decoded for a session that cannot run
