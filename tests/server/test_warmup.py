"""The warm-up before SERVING (server/warmup.py): a model whose defaults do not make a request is warmed up with the
fields it declares (`Capabilities.warmup_fields`: AuK, which must be told a duration), not skipped."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from vocalis.server.engine import Engine
from vocalis.server.warmup import warm_up
from vocalis.stages.models.registry import load_model

AUK = Path(__file__).resolve().parents[1] / "goldens" / "auk" / "tiny"


def test_auk_is_warmed_up_with_its_declared_duration(caplog):
    model = load_model(str(AUK))
    engine = Engine([model], max_queued_requests=4)
    submitted, samples = [], []
    submit = engine.submit

    def recording_submit(model, text, stage_input, *args, **kwargs):
        submitted.append(stage_input)
        job = submit(model, text, stage_input, *args, **kwargs)
        audio = job.audio

        async def counted():
            async for chunk in audio():
                samples.append(len(chunk))
                yield chunk

        job.audio = counted
        return job

    engine.submit = recording_submit
    try:
        with caplog.at_level(logging.INFO, logger="vocalis.server.warmup"):
            asyncio.run(warm_up(engine))
    finally:
        engine.close()
    assert model.family == "auk" and f"warmed up {model.name}" in caplog.text and "no warm-up" not in caplog.text, caplog.text
    assert [s.duration_seconds for s in submitted] == [1.0]
    assert sum(samples) == model.capabilities.sample_rate  # one second of audio went through every stage
