"""Stand-ins for a loaded model and the engine, so session logic runs with no model at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from vocalis.server.engine import UtteranceStats
from vocalis.server.errors import StatusError
from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.model import Capabilities, LoadedModel
from vocalis.stages.runtime.request import RequestParams

RATE = 16000


class FakeAdapter:
    """Presets "alice" and "bob"; a `seed` of -1 is a model-specific refusal. Records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def resolve_voice(self, voice: str) -> str:
        self.calls.append(("resolve_voice", voice))
        if voice.lower() in ("", "default", "alice"):
            return "alice"
        if voice.lower() == "bob":
            return "bob"
        raise UnknownVoice(voice, ["alice", "bob"])

    def stage_input(self, params: RequestParams) -> dict[str, Any]:
        self.calls.append(("stage_input", params))
        if params.fields.get("seed") == -1:
            raise InvalidField("seed", "INVALID_SEED", "seed must not be -1")
        return {"voice": params.voice, "fields": params.fields, "reference": params.reference}


def fake_model(accepted: frozenset[str] = frozenset({"speed", "seed"}), required: frozenset[str] = frozenset()) -> LoadedModel:
    caps = Capabilities(
        sample_rate=RATE, voices=("alice", "bob"), default_voice="alice", accepted_fields=accepted, required_fields=required
    )
    return LoadedModel(name="fake", family="test", capabilities=caps, adapter=FakeAdapter(), pipeline=None)  # type: ignore[arg-type]


@dataclass
class _Request:
    error: Exception | None = None
    warnings: list[tuple[str, str, str]] = field(default_factory=list)
    """Stage warnings (field, code, message), as SynthesisRequest carries them."""


class FakeJob:
    """An utterance whose audio the test releases: `give(n)` sends n samples, `end()` finishes, `fail()` fails it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.aborted = False
        self.request = _Request()
        self._chunks: asyncio.Queue[np.ndarray | None] = asyncio.Queue()
        self.samples = 0
        self.released = False
        """Its engine slot is free again (read to the end, or aborted), as the real engine's."""

    def give(self, samples: int) -> None:
        self._chunks.put_nowait(np.full(samples, 0.25, np.float32))

    def end(self) -> None:
        self._chunks.put_nowait(None)

    def fail(self, error: Exception) -> None:
        self.request.error = error
        self._chunks.put_nowait(None)

    async def audio(self) -> AsyncIterator[np.ndarray]:
        try:
            while not self.aborted:
                chunk = await self._chunks.get()
                if chunk is None:
                    return
                self.samples += len(chunk)
                yield chunk
        finally:
            self.released = True

    def abort(self) -> None:
        self.aborted = True
        self.released = True
        self._chunks.put_nowait(None)

    def stats(self) -> UtteranceStats:
        return UtteranceStats(samples=self.samples, output_tokens=0, time_to_first_audio_s=0.0, synthesis_s=0.01)


@dataclass
class FakeEngine:
    """Admits up to `capacity` jobs at once (then RESOURCE_EXHAUSTED); every admitted job is kept in `jobs`."""

    capacity: int = 100
    jobs: list[FakeJob] = field(default_factory=list)
    auto: bool = False
    """Each job gives one chunk of 100 samples per word and ends by itself."""

    def submit(self, model: LoadedModel, text: str, stage_input: object, request_id: str, word_times: bool = False,
               max_new_tokens: int | None = None) -> FakeJob:
        if sum(1 for job in self.jobs if not job.released) >= self.capacity:
            raise StatusError(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy", "QUEUE_FULL")
        job = FakeJob(text)
        if self.auto:
            job.give(100 * len(text.split()))
            job.end()
        self.jobs.append(job)
        return job
