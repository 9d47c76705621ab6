"""The engine with a stand-in stage: admission bound, abort, and a failing request that fails alone."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import numpy as np
import pytest

from vocalis.server.engine import Engine
from vocalis.server.errors import StatusError
from vocalis.stages.api.errors import SynthesisFailed
from vocalis.stages.api.model import Capabilities, LoadedModel
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.utterance import UtteranceStage


class ToneModel:
    """Yields one 0.1 s chunk per word; a word "boom" raises; a word "wait" blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def synthesize(self, request: SynthesisRequest, payload: None) -> Iterator[np.ndarray]:
        for word in request.text.split():
            if word == "boom":
                raise RuntimeError("the stage broke")
            if word == "wait":
                self.release.wait(10)
            yield np.full(1600, 0.1, dtype=np.float32)


@pytest.fixture
def engine() -> Iterator[tuple[Engine, ToneModel]]:
    stage = ToneModel()
    model = LoadedModel(
        name="tone",
        family="test",
        capabilities=Capabilities(sample_rate=16000, voices=("a",), default_voice="a", accepted_fields=frozenset()),
        adapter=None,  # type: ignore[arg-type]
        pipeline=Pipeline([UtteranceStage("tone", stage, max_num_seqs=1)]),
    )
    engine = Engine([model], max_queued_requests=2)
    yield engine, stage
    stage.release.set()
    engine.close()


async def collect(job) -> int:
    total = 0
    async for chunk in job.audio():
        total += len(chunk)
    return total


async def test_audio_flows_and_stats(engine):
    engine, _ = engine
    job = engine.submit(engine.model(""), "one two three", None, "r1")
    assert await collect(job) == 4800
    stats = job.stats()
    assert stats.samples == 4800 and 0 <= stats.time_to_first_audio_s <= stats.synthesis_s
    assert engine.outstanding(engine.model("tone")) == 0


async def test_queue_bound_and_abort_frees_a_slot(engine):
    engine, stage = engine
    model = engine.model("TONE")
    first = engine.submit(model, "wait a", None, "r1")
    second = engine.submit(model, "b", None, "r2")
    with pytest.raises(StatusError) as caught:
        engine.submit(model, "c", None, "r3")
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and caught.value.reason == "QUEUE_FULL"
    second.abort()
    third = engine.submit(model, "d", None, "r4")
    stage.release.set()
    assert await collect(first) == 3200
    assert await collect(third) == 1600
    assert second.aborted and await collect(second) == 0


async def test_a_failing_request_fails_alone(engine):
    engine, _ = engine
    model = engine.model("")
    broken = engine.submit(model, "one boom", None, "bad")
    fine = engine.submit(model, "still fine", None, "good")
    with pytest.raises(SynthesisFailed, match="the stage broke"):
        await collect(broken)
    assert await collect(fine) == 3200


def test_unknown_model(engine):
    engine, _ = engine
    with pytest.raises(StatusError) as caught:
        engine.model("other")
    assert caught.value.code == grpc.StatusCode.NOT_FOUND and caught.value.field == "model"
